"""The shipped ``indoor`` weights: a compact float16 file with the Manhattan orientation search,
described by its model card, used by the demo and registering the demo's generated room. On the
real 3DMatch pairs: ``test_shipped_real_pairs.py``; full figures: BENCHMARKS.md.
"""

from __future__ import annotations

import torch

import pcreg
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
