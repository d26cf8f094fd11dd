"""The classes of issue #41 built from real scans (:mod:`pcreg.bench.real_classes`)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import cKDTree

from pcreg.bench.real_classes import (
    CLASSES,
    ClassCase,
    format_table,
    judge,
    real_class_cases,
    summarise,
)


def _case(gt, street=False) -> ClassCase:
    rng = np.random.default_rng(0)
    src = rng.uniform(0, 5, (500, 3))
    return ClassCase("rooms" if not street else "streets", "pair", "x", src, src.copy(), gt,
                     street)  # fmt: skip


def test_judge_counts_a_registered_wrong_pose_and_a_refused_negative():
    right = judge(_case(np.eye(4)), np.eye(4), registered=True)
    assert right["right"] and not right["wrong"] and right["rre_deg"] == 0.0
    turned = np.eye(4)
    turned[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]  # 90 deg off
    wrong = judge(_case(np.eye(4)), turned, registered=True)
    assert wrong["wrong"] and not wrong["right"] and wrong["rre_deg"] == pytest.approx(90.0)
    refused = judge(_case(np.eye(4)), turned, registered=False)
    assert not refused["wrong"] and not refused["right"]
    negative = judge(_case(None), np.eye(4), registered=True)
    assert negative["wrong"] and "rre_deg" not in negative
    assert not judge(_case(None), np.eye(4), registered=False)["wrong"]


def test_a_street_is_judged_by_its_centres_displacement():
    moved = np.eye(4)
    moved[:3, 3] = [0.5, 0.0, 0.0]  # 0.5 m: over the KITTI criterion's 0.3 m
    assert judge(_case(np.eye(4), street=True), moved, True)["wrong"]
    moved[:3, 3] = [0.2, 0.0, 0.0]
    assert judge(_case(np.eye(4), street=True), moved, True)["right"]


def test_summary_and_table_count_each_family_and_class():
    recs = [
        {"family": "rooms", "cls": "pair", "registered": True, "right": True, "wrong": False},
        {"family": "rooms", "cls": "pair", "registered": True, "right": False, "wrong": True},
        {"family": "rooms", "cls": "mirror", "registered": False, "right": False, "wrong": False},
    ]
    rows = summarise(recs)
    assert [(r["cls"], r["cases"], r["registered"], r["wrong"]) for r in rows] == [
        ("pair", 2, 2, 1), ("mirror", 1, 0, 0)]  # fmt: skip
    table = format_table(rows, "cmd")
    assert "| rooms | pair | 2 | 2 | 1 | 1 | 1 |" in table
    assert "| rooms | 3 | 2 | 1 | 0.500 |" in table


@pytest.mark.data
def test_every_class_of_one_round_is_built_with_its_truth():
    from shared_paths import SHARED_DATA

    if not (SHARED_DATA / "geotransformer_repo" / "demo").is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA}")
    cases = list(real_class_cases(SHARED_DATA, rounds=1, seed=3))
    families = {c.family for c in cases}
    assert "rooms" in families and "streets" in families
    for fam in families:
        classes = {c.cls for c in cases if c.family == fam}
        expected = set(CLASSES) - ({"narrow-fov"} if fam != "streets" else set())
        # a family with a single scene has no unrelated scan; every family has another to cross
        assert classes >= expected - {"unrelated"}, (fam, expected - classes)
    for c in cases:
        assert (c.gt is None) == (c.cls in ("mirror", "mirror-self", "disjoint", "unrelated",
                                            "cross")), c.cls  # fmt: skip
        if c.cls == "pair":  # the truth lays the moved source onto the reference
            moved = c.src @ c.gt[:3, :3].T + c.gt[:3, 3]
            tol = 0.5 if c.street else 0.05 * np.linalg.norm(np.ptp(c.ref, axis=0)) / 10
            dist, _ = cKDTree(c.ref).query(moved[:: max(1, len(moved) // 2000)])
            assert np.mean(dist < tol) > 0.6, (c.name, np.mean(dist < tol))
