"""Shared fixtures: seeded generators, the shared-data locator, markers."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PCREG_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` (or $PCREG_SHARED_DATA); skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA}")
    return SHARED_DATA
