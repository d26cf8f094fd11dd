"""The shipped ``outdoor`` weights register LiDAR scans (the weights issue's outdoor protocol).

Real: KITTI 00 95<-94 and 199<-198 from ``../shared/data`` (never trained on; the real training
scans are from other places of sequences 00-07), each under random yaw + horizontal shifts up to
10 m, through the public API, no ICP. Success: RRE < 2 deg and RTE < 0.3 m. The full 10-draw
figures (and FPFH + RANSAC beside them) are in BENCHMARKS.md; these tests keep the shipped file,
its loading path and the inference path honest.
"""

from __future__ import annotations

import pytest
import torch

import pcreg
from pcreg.bench.registration import is_success, real_cases
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


@pytest.mark.data
def test_shipped_outdoor_registers_real_kitti_from_any_yaw(shared_data):
    cases = [c for c in real_cases(shared_data, draws=2, seed=2026) if c.setting == "outdoor"]
    if not cases:
        pytest.skip("KITTI pairs absent from shared data")
    results = [
        (c.group, *is_success(c, pcreg.register(c.src, c.ref, model="outdoor").transform))
        for c in cases
    ]
    failures = [r for r in results if not r[1]]
    assert not failures, failures
    assert max(r[3] for r in results) < 0.3  # RTE, metres: well inside the bound
