"""The shipped weights: compact float16 files described by their model cards, and how they do
on the real pairs of ``../shared/data``, through the public API, no ICP,
under the weights issue's random motions (``pcreg.bench.registration.real_cases``: indoor a
uniform rotation and up to 1 m, outdoor any yaw and up to 10 m horizontally), two draws per
pair. The 10-draw figures, with FPFH + RANSAC beside them, are in BENCHMARKS.md.

Indoor: 3DMatch redkitchen 0<-6 and 0<-5 (the model saw generated rooms only); success RMSE
<= 0.2 m, and RRE under 10 deg (a wrong orientation hypothesis is >= 90 deg off). Outdoor: KITTI
00 95<-94 and 199<-198 (never trained on); success RRE < 2 deg and RTE < 0.3 m, and RTE well
inside that.
"""

from __future__ import annotations

import pytest
import torch

import pcreg
from pcreg.bench.registration import real_cases, run_cases
from pcreg.engine.checkpoint import load_checkpoint
from pcreg.registration.loading import WEIGHTS_DIR


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("indoor", {"voxel_size": 0.05, "num_stages": 4, "orientation_search": "manhattan"}),
        ("outdoor", {"voxel_size": 0.3, "num_stages": 5, "orientation_search": "none"}),
    ],
)
def test_shipped_file_is_compact_half_precision_with_provenance(model, expected):
    path = WEIGHTS_DIR / f"{model}.pt"
    assert path.stat().st_size <= 25 * 2**20
    ckpt = load_checkpoint(path, kind="geotransformer")
    floats = [v for v in ckpt["model"].values() if v.is_floating_point()]
    assert floats and all(v.dtype == torch.float16 for v in floats)
    assert {k: ckpt["config"].get(k, "none") for k in expected} == pytest.approx(expected)
    card = (WEIGHTS_DIR / f"{model}.md").read_text()
    assert f"step {ckpt['step']}" in card  # the model card describes this very file


@pytest.mark.data
@pytest.mark.parametrize(
    ("model", "worst_rre_deg", "worst_rte_m"), [("indoor", 10.0, 1.0), ("outdoor", 2.0, 0.3)]
)
def test_shipped_model_registers_the_real_pairs(shared_data, model, worst_rre_deg, worst_rte_m):
    cases = [c for c in real_cases(shared_data, draws=2, seed=2026) if c.setting == model]
    if not cases:
        pytest.skip(f"the real {model} pairs are absent from shared data")
    outcomes = run_cases(
        cases, {model: lambda src, ref, _: pcreg.register(src, ref, model=model).transform}
    )
    assert len(outcomes) == len(cases)
    failures = [o for o in outcomes if not o.success]
    assert not failures, failures
    assert max(o.rre_deg for o in outcomes) < worst_rre_deg
    assert max(o.rte_m for o in outcomes) < worst_rte_m
