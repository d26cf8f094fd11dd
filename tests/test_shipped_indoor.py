"""The shipped ``indoor`` weights register RGB-D fragments (the weights issue's indoor protocol).

Real: 3DMatch redkitchen 0<-6 and 0<-5 from ``../shared/data`` (never trained on: the model saw
generated rooms only), each under a uniform random rotation and up to 1 m of translation,
through the public API, no ICP. Success: RMSE <= 0.2 m (3DMatch registration recall). The
10-draw figures, with FPFH + RANSAC beside them, are in BENCHMARKS.md; these tests keep the
shipped file, its loading path, the orientation search and the demo honest.
"""

from __future__ import annotations

import pytest
import torch

import pcreg
from pcreg.bench.registration import is_success, real_cases
from pcreg.demo import resolve_defaults, synthetic_demo_pair
from pcreg.engine.checkpoint import load_checkpoint
from pcreg.weights import WEIGHTS_DIR

INDOOR = WEIGHTS_DIR / "indoor.pt"


def test_shipped_indoor_file_is_compact_half_precision_with_provenance():
    assert INDOOR.stat().st_size <= 25 * 2**20
    ckpt = load_checkpoint(INDOOR, kind="geotransformer")
    floats = [v for v in ckpt["model"].values() if v.is_floating_point()]
    assert floats and all(v.dtype == torch.float16 for v in floats)
    assert ckpt["config"]["num_stages"] == 4
    assert ckpt["config"]["orientation_search"] == "manhattan"
    card = (WEIGHTS_DIR / "indoor.md").read_text()
    assert f"step {ckpt['step']}" in card  # the model card describes this very file


def test_demo_uses_the_shipped_indoor_model_on_a_generated_room():
    source, method, icp = resolve_defaults("auto", "auto", False, "indoor", None)
    assert (source, method, icp) == ("synthetic", "geotransformer", False)


def test_shipped_indoor_registers_the_demo_room():
    src, ref, gt, _ = synthetic_demo_pair()
    result = pcreg.register(src, ref, model="indoor")
    err = result.errors(gt, src)
    assert err["rmse_m"] <= 0.2, err
    assert err["rre_deg"] < 5.0, err


@pytest.mark.data
def test_shipped_indoor_registers_real_3dmatch_from_any_rotation(shared_data):
    cases = [c for c in real_cases(shared_data, draws=2, seed=2026) if c.setting == "indoor"]
    if not cases:
        pytest.skip("3DMatch pairs absent from shared data")
    results = [
        (c.group, *is_success(c, pcreg.register(c.src, c.ref, model="indoor").transform))
        for c in cases
    ]
    failures = [r for r in results if not r[1]]
    assert not failures, failures
    assert max(r[2] for r in results) < 10.0  # RRE, degrees: a wrong hypothesis is >= 90
