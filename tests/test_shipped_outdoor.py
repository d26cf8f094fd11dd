"""The shipped ``outdoor`` weights: a compact float16 file whose model card describes it.
On the real KITTI pairs: ``test_shipped_real_pairs.py``; full figures: BENCHMARKS.md.
"""

from __future__ import annotations

import pytest
import torch

from pcreg.engine.checkpoint import load_checkpoint
from pcreg.weights import WEIGHTS_DIR

OUTDOOR = WEIGHTS_DIR / "outdoor.pt"


def test_shipped_outdoor_file_is_compact_half_precision_with_provenance():
    assert OUTDOOR.stat().st_size <= 25 * 2**20
    ckpt = load_checkpoint(OUTDOOR, kind="geotransformer")
    floats = [v for v in ckpt["model"].values() if v.is_floating_point()]
    assert floats and all(v.dtype == torch.float16 for v in floats)
    assert ckpt["config"]["voxel_size"] == pytest.approx(0.3)
    assert ckpt["config"]["num_stages"] == 5
    card = (WEIGHTS_DIR / "outdoor.md").read_text()
    assert f"step {ckpt['step']}" in card  # the model card describes this very file
