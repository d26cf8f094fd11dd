"""The registration benchmark's success criteria, motions and table."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pcreg.bench.registration import (
    Case,
    Outcome,
    _motion,
    format_registration_table,
    is_success,
    real_cases,
    run_cases,
)


def _case(setting: str) -> Case:
    rng = np.random.default_rng(0)
    src = rng.normal(size=(200, 3)).astype(np.float32)
    return Case("g", setting, src, src, np.eye(4))


def test_success_criteria_follow_the_protocols():
    indoor, outdoor = _case("indoor"), _case("outdoor")
    est = np.eye(4)
    est[0, 3] = 0.19  # 19 cm everywhere: RMSE 0.19 m
    assert is_success(indoor, est)[0]
    est[0, 3] = 0.21
    assert not is_success(indoor, est)[0]
    est[0, 3] = 0.29
    assert is_success(outdoor, est)[0] and not is_success(outdoor, est @ _rot_z(2.5))[0]
    ok, rre, rte, rmse = is_success(outdoor, _rot_z(1.5))
    assert ok and rre == pytest.approx(1.5) and rte == 0.0 and rmse > 0


def _rot_z(deg: float) -> np.ndarray:
    t = np.eye(4)
    c, s = np.cos(np.radians(deg)), np.sin(np.radians(deg))
    t[:2, :2] = [[c, -s], [s, c]]
    return t


def test_outdoor_motions_are_yaw_and_horizontal_shift():
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        m = _motion("outdoor", g)
        assert np.allclose(m[2], [0, 0, 1, 0]) and np.hypot(*m[:2, 3]) <= 10.0
        assert np.allclose(m[:3, :3] @ m[:3, :3].T, np.eye(3))


def test_table_marks_missing_methods_and_counts():
    cases = [_case("indoor"), _case("outdoor")]
    methods = {
        "exact": lambda s, r, setting: np.eye(4),
        "indoor only": lambda s, r, setting: np.eye(4) if setting == "indoor" else None,
    }
    cases[1].group = "h"
    outcomes = run_cases(cases, methods)
    assert len(outcomes) == 3 and all(isinstance(o, Outcome) and o.success for o in outcomes)
    table = format_registration_table(outcomes, "cmd")
    assert "| g | 1 | 100% (1/1)" in table and "| h | 1 | 100% (1/1)" in table and "n/a" in table


def test_a_method_may_report_its_own_time():
    outcomes = run_cases([_case("indoor")], {"timed": lambda s, r, setting: (np.eye(4), 12.5)})
    assert outcomes[0].success and outcomes[0].time_s == 12.5


def test_real_cases_move_the_source_and_keep_the_ground_truth_consistent(shared_data):
    from pcreg.bench.real_pairs import real_pairs
    from pcreg.io import read_points

    pairs = real_pairs(shared_data)
    cases = real_cases(shared_data, draws=2)
    assert [c.group for c in cases] == [p.name for p in pairs for _ in range(2)]
    for pair, case in zip([p for p in pairs for _ in range(2)], cases, strict=True):
        src = read_points(pair.src).astype(np.float64)
        gt = np.asarray(pair.gt)
        # the moved source, carried by the case's truth, lands where the original truth puts it
        moved = case.src.astype(np.float64) @ case.gt[:3, :3].T + case.gt[:3, 3]
        expected = src @ gt[:3, :3].T + gt[:3, 3]
        assert np.abs(moved - expected).max() < 1e-3
        assert np.abs(case.src - src).max() > 0.01  # it really was moved


def test_synthetic_outdoor_cases_read_the_kitti_layout(tmp_path):
    import json

    from pcreg.bench.registration import synthetic_cases

    rng = np.random.default_rng(1)
    ref = rng.uniform(-30, 30, size=(300, 3)).astype(np.float32)
    t = _rot_z(40.0)
    t[:3, 3] = [5.0, -2.0, 0.0]
    src = ((ref - t[:3, 3]) @ t[:3, :3]).astype(np.float32)  # ref = T src
    (tmp_path / "downsampled" / "000007").mkdir(parents=True)
    (tmp_path / "metadata").mkdir()
    for k, pts in enumerate((ref, src)):
        np.save(tmp_path / "downsampled" / "000007" / f"{k:06d}.npy", pts)
    rec = {"seq_id": 7, "frame0": 0, "frame1": 1, "pcd0": "downsampled/000007/000000.npy",
           "pcd1": "downsampled/000007/000001.npy", "transform": t.tolist()}  # fmt: skip
    (tmp_path / "metadata" / "val.json").write_text(json.dumps([rec, rec]))
    cases = synthetic_cases(tmp_path, "outdoor", limit=5)
    assert [c.group for c in cases] == ["synthetic outdoor"] * 2
    for c in cases:  # each case under its own extra motion, and the truth still maps src to ref
        assert np.allclose(c.src @ c.gt[:3, :3].T + c.gt[:3, 3], ref, atol=1e-3)
        assert not np.allclose(c.src, src, atol=1e-2)
