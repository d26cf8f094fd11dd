"""What ``registered`` promises (:mod:`pcreg.registration.promise`), and its verdict against a
ground truth: ``register --gt``, the demo, ``RegistrationResult.against``."""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from pcreg.registration import promise as P
from pcreg.registration.result import RegistrationResult


def _cand(transform, contrast):
    """A result holding ``transform`` (4, 4) and little else: what the promise reads."""
    del contrast  # the verdict's measurement, not read here
    return RegistrationResult(
        transform=np.asarray(transform, float), src_corr_points=np.zeros((3, 3)),
        ref_corr_points=np.zeros((3, 3)), corr_scores=np.ones(3), method="geotransformer",
        model="indoor", setting="indoor", icp=True, voxel_size=0.05,
    )  # fmt: skip


def _turned(deg, shift=0.0):
    t = np.eye(4)
    t[:3, :3] = Rotation.from_euler("z", deg, degrees=True).as_matrix()
    t[0, 3] = shift
    return t


def test_the_promise_of_registered_and_its_boundaries():
    err = {"rre_deg": 9.99, "rte_m": 5.0, "rmse_m": 0.5}
    assert P.keeps_promise(err, diagonal=10.0)  # RMSE 0.5 <= 5 % of 10
    assert not P.keeps_promise({**err, "rre_deg": 10.0}, diagonal=10.0)
    assert not P.keeps_promise({**err, "rmse_m": 0.51}, diagonal=10.0)
    street = {"rre_deg": 1.99, "rte_m": 0.29, "rmse_m": 9.0}
    assert P.keeps_promise(street, 1.0, street=True)
    assert not P.keeps_promise({**street, "rre_deg": 2.0}, 1.0, street=True)
    assert not P.keeps_promise({**street, "rte_m": 0.3}, 1.0, street=True)
    assert P.keeps_promise({**street, "rte_m": 700.0}, 1.0, street=True, shift=0.1)


def test_a_georeferenced_street_is_judged_at_its_points_not_at_the_origin():
    """An 80 m scan at UTM-like coordinates, registered 0.01 deg off about its centre: RTE at
    the origin reads 738 m, so the KITTI rule said WRONG; the source's centre moved 4 mm."""
    rng = np.random.default_rng(0)
    src = rng.uniform(-40, 40, (2000, 3)) + np.array([500_000.0, 4_200_000.0, 50.0])
    turn = np.eye(4)
    turn[:3, :3] = Rotation.from_euler("z", 0.01, degrees=True).as_matrix()
    centre = src.mean(axis=0)
    turn[:3, 3] = centre - turn[:3, :3] @ centre  # about the source's centre
    result = _cand(turn, 0.9)
    result.setting = "outdoor"
    errors = {**result.errors(np.eye(4), src)}
    assert errors["rte_m"] > 700 and errors["rmse_m"] < 0.01
    judged = P.against_truth(result, np.eye(4), errors, src, src)
    assert judged["right"] is True
    assert re.fullmatch(r"RRE 0.01 deg < 2 deg: yes; the source's centre moved \S+ mm < 30 cm "
                        r"\(KITTI's RTE\): yes", judged["right_criterion"])  # fmt: skip
    result.setting = "indoor"  # the room rule: RMSE against 5 % of the 113 m diagonal
    judged = P.against_truth(result, np.eye(4), errors, src, src)
    assert (
        judged["right"] is True
        and judged["right_criterion"].endswith(" m (5% of the reference's diagonal): yes")
        and P.promise_text() == "RRE < 10 deg and RMSE <= 5% of the reference's diagonal"
    )


def test_a_result_against_its_truth_in_python():
    """What register --gt --json adds, from Python: the errors, right and each condition."""
    rng = np.random.default_rng(1)
    src = rng.uniform(0, 4, (500, 3))
    result = _cand(_turned(30), 0.9)  # 30 deg from the truth (the identity)
    out = result.against(np.eye(4), src, src)
    assert out["right"] is False and out["rre_deg"] == pytest.approx(30.0)
    assert out["right_criterion"].startswith("RRE 30 deg < 10 deg: no; RMSE ")
    assert result.against(_turned(30), src, src)["right"] is True


def test_a_gt_in_other_units_than_the_clouds_is_named():
    """A --gt in metres for clouds in millimetres said WRONG and no more (hostile run)."""
    rng = np.random.default_rng(2)
    src = rng.uniform(0, 4000, (500, 3))  # millimetres
    truth = _turned(30, 0.0)
    truth[:3, 3] = [1500.0, -200.0, 40.0]
    result = _cand(truth, 0.9)
    result.units = "millimetres"
    in_metres = truth.copy()
    in_metres[:3, 3] /= 1000
    out = result.against(in_metres, src, src)
    assert out["right"] is False
    assert out["right_criterion"].endswith(
        "; with --gt's translation x1000 it would be right: is --gt in other units than the "
        "clouds? It must be in theirs"
    )
    assert result.against(truth, src, src)["right"] is True
    away = truth.copy()
    away[:3, 3] += 500.0  # wrong in any unit: no hint
    assert "--gt's translation" not in result.against(away, src, src)["right_criterion"]
