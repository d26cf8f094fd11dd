"""The shipped ``outdoor`` weights register LiDAR scans (the weights issue's outdoor protocol).

Real: KITTI 00 95<-94 and 199<-198 from ``../shared/data`` (never trained on; the real training
scans are from other places of sequences 00-07), each under random yaw + horizontal shifts up to
10 m, through the public API, no ICP. Success: RRE < 2 deg and RTE < 0.3 m. The full 10-draw
figures (and FPFH + RANSAC beside them) are in BENCHMARKS.md; these tests keep the shipped file,
its loading path and the inference path honest.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pcreg
from pcreg.bench.real_pairs import real_pairs
from pcreg.bench.registration import _moved, is_success
from pcreg.engine.checkpoint import load_checkpoint
from pcreg.io import read_points
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
    pairs = [p for p in real_pairs(shared_data) if p.setting == "outdoor"]
    if not pairs:
        pytest.skip("KITTI pairs absent from shared data")
    g = torch.Generator().manual_seed(2026)
    results = []
    for p in pairs:
        src, ref = read_points(p.src), read_points(p.ref)
        for _ in range(2):
            case = _moved(p.name, "outdoor", src, ref, np.asarray(p.gt), g)
            est = pcreg.register(case.src, case.ref, model="outdoor").transform
            results.append((p.name, *is_success(case, est)))
    failures = [r for r in results if not r[1]]
    assert not failures, failures
    assert max(r[3] for r in results) < 0.3  # RTE, metres: well inside the bound
