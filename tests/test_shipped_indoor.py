"""The shipped ``indoor`` weights register RGB-D fragments (the weights issue's indoor protocol).

Real: 3DMatch redkitchen 0<-6 and 0<-5 from ``../shared/data`` (never trained on: the model saw
generated rooms only), each under a uniform random rotation and up to 1 m of translation,
through the public API, no ICP. Success: RMSE <= 0.2 m (3DMatch registration recall). The
10-draw figures, with FPFH + RANSAC beside them, are in BENCHMARKS.md; these tests keep the
shipped file, its loading path, the orientation search and the demo honest.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pcreg
from pcreg.bench.real_pairs import real_pairs
from pcreg.bench.registration import _moved, is_success
from pcreg.demo import resolve_defaults, synthetic_demo_pair
from pcreg.engine.checkpoint import load_checkpoint
from pcreg.io import read_points
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
    pairs = [p for p in real_pairs(shared_data) if p.setting == "indoor"]
    if not pairs:
        pytest.skip("3DMatch pairs absent from shared data")
    g = torch.Generator().manual_seed(2026)
    results = []
    for p in pairs:
        src, ref = read_points(p.src), read_points(p.ref)
        for _ in range(2):
            case = _moved(p.name, "indoor", src, ref, np.asarray(p.gt), g)
            est = pcreg.register(case.src, case.ref, model="indoor").transform
            results.append((p.name, *is_success(case, est)))
    failures = [r for r in results if not r[1]]
    assert not failures, failures
    assert max(r[2] for r in results) < 10.0  # RRE, degrees: a wrong hypothesis is >= 90
