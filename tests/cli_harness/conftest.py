"""Fixtures of the hostile CLI harness: the session's workspace of generated inputs, and an
optional log of every case's outcome (``PCREG_HARNESS_LOG=FILE``: one JSON line per case, read
by ``summarize.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness_data import DEMO, KITTI, SHARED_DATA, Workspace


@pytest.fixture(scope="session")
def harness_workspace(tmp_path_factory) -> Workspace:
    """Generated inputs shared by all cases (in a session temporary directory, never the
    repository); skips when ``../shared/data`` (or ``$PCREG_SHARED_DATA``) is absent."""
    for part in (DEMO, KITTI):
        if not (SHARED_DATA / part).is_dir():
            pytest.skip(f"real data not found at {SHARED_DATA / part}")
    return Workspace(tmp_path_factory.mktemp("cli_harness"), SHARED_DATA)
