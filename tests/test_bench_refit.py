"""Refitting a published pose to the scans: it must find the pose the scans agree on, from the
published one and from a start moved away from it."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg.bench.real_pairs import real_pairs
from pcreg.bench.refit import refit_ground_truth
from pcreg.geometry import pose_errors
from pcreg.geometry.transforms import rotation_from_axis_angle


def _moved(transform: np.ndarray, angle_deg: float, shift: np.ndarray, seed: int) -> np.ndarray:
    """``transform`` composed with a rotation of ``angle_deg`` about a random axis and a
    translation ``shift`` (metres)."""
    import torch

    axis = torch.from_numpy(np.random.default_rng(seed).normal(size=3))
    delta = np.eye(4)
    delta[:3, :3] = rotation_from_axis_angle(
        axis / axis.norm(), torch.tensor(np.radians(angle_deg), dtype=torch.float64)
    ).numpy()
    delta[:3, 3] = shift
    return delta @ transform


def test_refit_recovers_the_true_pose_from_a_wrong_published_one(room_pair):
    src, ref, truth = room_pair
    published = _moved(truth, 1.5, np.array([0.06, -0.04, 0.03]), seed=0)
    before = pose_errors(published, truth, src)
    assert before["rre_deg"] > 1.4 and before["rte_m"] > 0.05  # the start really is off
    after = pose_errors(refit_ground_truth(src, ref, published, "indoor"), truth, src)
    # the generated scans carry sensor noise, so "exact" means well inside one fine voxel
    assert after["rre_deg"] < 0.3 and after["rte_m"] < 0.01 and after["rmse_m"] < 0.01


def test_refit_of_a_real_pair_lands_on_one_pose_from_either_start(shared_data):
    from pcreg.io import read_points

    pair = real_pairs(shared_data)[0]  # 3DMatch 0<-6, whose published pose is a few cm off
    src, ref, gt = read_points(pair.src), read_points(pair.ref), np.asarray(pair.gt)
    from_gt = refit_ground_truth(src, ref, gt, "indoor")
    from_far = refit_ground_truth(
        src, ref, _moved(gt, 2.0, np.array([0.1, -0.1, 0.05]), 1), "indoor"
    )
    agree = pose_errors(from_far, from_gt, src)
    assert agree["rre_deg"] < 0.02 and agree["rte_m"] < 0.002
    off = pose_errors(gt, from_gt, src)  # the published pose is not the best fit: refit moved it
    assert off["rte_m"] > 0.03


def test_refit_rejects_an_unknown_setting(room_pair):
    src, ref, truth = room_pair
    with pytest.raises(ValueError, match="setting"):
        refit_ground_truth(src, ref, truth, "underwater")
