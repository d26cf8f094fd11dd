"""The demo runs on the shipped ``indoor`` weights and they register its generated room. The
file itself and the real 3DMatch pairs: ``test_shipped_weights.py``; full figures: BENCHMARKS.md.
"""

from __future__ import annotations

import pcreg
from pcreg.demo import resolve_defaults, synthetic_demo_pair


def test_demo_uses_the_shipped_indoor_model_on_a_generated_room():
    source, method, icp = resolve_defaults("auto", "auto", False, "indoor", None)
    # pcreg register's own default, which picks the shipped indoor model for a room
    assert (source, method, icp) == ("synthetic", "auto", False)


def test_shipped_indoor_registers_the_demo_room():
    src, ref, gt, _ = synthetic_demo_pair()
    result = pcreg.register(src, ref, model="indoor")
    err = result.errors(gt, src)
    assert err["rmse_m"] <= 0.2, err
    assert err["rre_deg"] < 5.0, err


def test_orientation_keep_sets_how_many_hypotheses_run(monkeypatch):
    """``orientation_keep=0`` runs all 24 cube hypotheses, the default only the top-ranked
    few, and both register the demo room."""
    from pcreg.registration.network import Registrar
    from pcreg.registration.onnx_network import OnnxRegistrar

    src, ref, gt, _ = synthetic_demo_pair()
    run = []

    def counting(self, src_c, ref_c, rotations, original=Registrar.hypotheses):
        run.append(len(rotations))
        return original(self, src_c, ref_c, rotations)

    def prepared(self, src_c, ref_c, original=OnnxRegistrar.prepare):
        hypotheses = original(self, src_c, ref_c)
        first = [True]

        def counted(rotations):  # the search's own call; a later one is the mirror check's
            if first:
                run.append(len(rotations))
                first.clear()
            return hypotheses(rotations)

        return counted

    # whichever runtime runs the shipped network (ONNX Runtime's search prepares, then runs)
    monkeypatch.setattr(Registrar, "hypotheses", counting)
    monkeypatch.setattr(OnnxRegistrar, "prepare", prepared)
    for keep in (None, 0.0):
        result = pcreg.register(src, ref, model="indoor", orientation_keep=keep)
        assert result.errors(gt, src)["rmse_m"] <= 0.2
    assert 1 <= run[0] < 24 and run[1] == 24, run
