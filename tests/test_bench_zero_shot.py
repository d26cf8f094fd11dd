"""The zero-shot benchmark's cases and success criterion (the run itself: BENCHMARKS.md)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from pcreg.bench.zero_shot import ZeroShotCase, _motion, success, zero_shot_cases


def test_motions_are_rigid_and_bounded(rng):
    for yaw in (False, True):
        for _ in range(50):
            m = _motion(rng, 9.0, yaw)
            assert np.allclose(m[:3, :3] @ m[:3, :3].T, np.eye(3)) and np.linalg.det(m) > 0
            assert np.linalg.norm(m[:3, 3]) <= 3.0
            if yaw:
                assert np.allclose(m[:3, :3] @ [0, 0, 1], [0, 0, 1])


def test_success_criteria(rng):
    src = rng.uniform(0, 1, (500, 3))
    gt = np.eye(4)
    case = ZeroShotCase("bunny", "x", src, src, gt)
    assert success(case, gt)
    turned = np.eye(4)
    turned[:3, :3] = Rotation.from_euler("z", 12, degrees=True).as_matrix()
    assert not success(case, turned)  # RRE 12 deg
    shifted = np.eye(4)
    shifted[0, 3] = 0.1  # RMSE 0.1 > 5 % of the 1.7 diagonal
    assert not success(case, shifted)
    shifted[0, 3] = 0.05
    assert success(case, shifted)
    kitti = ZeroShotCase("KITTI, yaw", "x", src, src, gt, kitti=True)
    shifted[0, 3] = 0.31
    assert not success(kitti, shifted)
    assert not success(case, None)


def test_every_group_is_built_from_the_shared_data(shared_data):
    if not (shared_data.parent / "train_data" / "stanford_bunny_range_scans").is_dir():
        pytest.skip("train_data not found")
    cases = zero_shot_cases(shared_data, draws=1)
    groups = {}
    for c in cases:
        groups[c.group] = groups.get(c.group, 0) + 1
    assert groups == {"bunny": 22, "bunny (mm)": 22, "dragon": 10, "TUM RGB-D": 2,
                      "3DMatch": 2, "KITTI, any rotation": 2, "KITTI, yaw": 2}  # fmt: skip
    for c in cases:  # every case's truth maps its source onto its reference
        moved = c.src @ c.gt[:3, :3].T + c.gt[:3, 3]
        lo, hi = np.percentile(c.ref, [1, 99], axis=0)
        inside = np.all((moved >= lo - 0.1 * (hi - lo)) & (moved <= hi + 0.1 * (hi - lo)), axis=1)
        assert inside.mean() > 0.5, (c.group, c.name)


def test_table_counts_wrong_but_registered_and_right_but_refused():
    from pcreg.bench.zero_shot import GroupRow, Outcome, format_zero_shot_table

    row = GroupRow("bunny", 4, [
        Outcome(True, 0.5, "geotransformer", True, True),
        Outcome(False, 0.7, "fpfh-ransac", True, False),  # wrong but registered
        Outcome(False, 2.5, "geotransformer", False, True),  # right but refused
        Outcome(False, 0.4, "geotransformer", False, False),
    ])  # fmt: skip
    table = format_zero_shot_table([row], "cmd")
    line = next(ln for ln in table.splitlines() if ln.startswith("| bunny"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[:7] == ["bunny", "4", "25% (1/4) / 0.60", "2.50", "1", "1", "1 / 0 / 0"]
