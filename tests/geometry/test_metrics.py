from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from pcreg.geometry import (
    covariance_rmse,
    feature_matching_recall,
    inlier_ratio,
    make_transform,
    pose_errors,
    registration_recall,
    relative_rotation_error_deg,
    relative_translation_error,
    rotation_from_axis_angle,
    rotation_to_quaternion,
    transform_rmse,
)

EYE = torch.eye(4, dtype=torch.float64)


def rot_z(deg: float) -> torch.Tensor:
    r = rotation_from_axis_angle(
        torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64),
        torch.tensor(math.radians(deg), dtype=torch.float64),
    )
    return make_transform(r, torch.zeros(3, dtype=torch.float64))


def test_rre_goldens():
    assert float(relative_rotation_error_deg(rot_z(90), EYE)) == pytest.approx(90.0)
    assert float(relative_rotation_error_deg(EYE, EYE)) == 0.0
    assert float(relative_rotation_error_deg(rot_z(180), EYE)) == pytest.approx(180.0)
    assert float(relative_rotation_error_deg(rot_z(30), rot_z(-15))) == pytest.approx(45.0)


def test_rre_small_angles_are_resolved():
    # 1e-4 deg is far below what a clipped arccos resolves in float32 (~0.02 deg).
    assert float(relative_rotation_error_deg(rot_z(1e-4).float(), EYE)) == pytest.approx(
        1e-4, rel=1e-2
    )


def test_rre_clips_slightly_non_orthonormal_input():
    scaled = EYE.clone()
    scaled[:3, :3] *= 1.0006  # like 3DMatch gt.log (det up to 1.0006)
    assert float(relative_rotation_error_deg(scaled, EYE)) == 0.0  # no NaN


def test_rte_and_rmse_goldens():
    t = EYE.clone()
    t[:3, 3] = torch.tensor([3.0, 4.0, 0.0], dtype=torch.float64)
    assert float(relative_translation_error(t, EYE)) == pytest.approx(5.0)
    pts = torch.randn(100, 3, dtype=torch.float64)
    assert float(transform_rmse(pts, t, EYE)) == pytest.approx(5.0)
    # Rotation by 180 deg about z of points on the unit circle in z=0 moves each by 2.
    circle = torch.tensor(
        [[math.cos(a), math.sin(a), 0.0] for a in np.linspace(0, 6, 50)], dtype=torch.float64
    )
    assert float(transform_rmse(circle, rot_z(180), EYE)) == pytest.approx(2.0)


def test_pose_errors_of_arrays_are_the_three_goldens():
    est = rot_z(180).numpy()  # numpy in, floats out
    est[:3, 3] = [3.0, 4.0, 0.0]
    circle = np.array([[math.cos(a), math.sin(a), 0.0] for a in np.linspace(0, 6, 50)])
    assert pose_errors(est, EYE.numpy()) == pytest.approx({"rre_deg": 180.0, "rte_m": 5.0})
    # each circle point is rotated onto its antipode (2 m) and shifted by (3, 4, 0)
    moved = circle @ est[:3, :3].T + est[:3, 3] - circle
    expected = float(np.sqrt((moved**2).sum(1).mean()))
    out = pose_errors(est, EYE.numpy(), circle)
    assert out == pytest.approx({"rre_deg": 180.0, "rte_m": 5.0, "rmse_m": expected})
    assert all(type(v) is float for v in out.values())


def test_inlier_ratio_and_fmr():
    src = torch.zeros(10, 3, dtype=torch.float64)
    ref = torch.zeros(10, 3, dtype=torch.float64)
    ref[:3, 0] = 0.5  # 3 of 10 off by 50 cm
    ref[3, 0] = 0.0999  # just inside 10 cm
    assert float(inlier_ratio(src, ref, EYE, 0.1)) == pytest.approx(0.7)
    assert float(inlier_ratio(src[:0], ref[:0], EYE)) == 0.0
    assert float(feature_matching_recall(torch.tensor([0.01, 0.05, 0.5, 0.049]))) == 0.5


def test_registration_recall_is_mean_of_group_recalls():
    ok = [True, True, True, False, False]
    groups = ["a", "a", "a", "b", "b"]
    assert registration_recall(ok) == pytest.approx(0.6)
    assert registration_recall(ok, groups) == pytest.approx(0.5)  # (1.0 + 0.0) / 2


def test_quaternion_goldens():
    q = rotation_to_quaternion(rot_z(90)[:3, :3])
    s = math.sqrt(0.5)
    torch.testing.assert_close(q, torch.tensor([s, 0.0, 0.0, s], dtype=torch.float64))
    q = rotation_to_quaternion(rot_z(-90)[:3, :3])
    torch.testing.assert_close(q, torch.tensor([s, 0.0, 0.0, -s], dtype=torch.float64))
    assert float(rotation_to_quaternion(rot_z(181)[:3, :3])[0]) >= 0  # w >= 0 convention


def test_covariance_rmse_translation_only():
    # For a pure translation t, x = [t, 0] and the MSE is t^T C_tt t / C00.
    info = torch.eye(6, dtype=torch.float64) * 4.0
    t = EYE.clone()
    t[:3, 3] = torch.tensor([0.1, 0.2, 0.2], dtype=torch.float64)
    assert float(covariance_rmse(t, EYE, info)) == pytest.approx(0.3)
    assert float(covariance_rmse(EYE, EYE, info)) == 0.0


def _read_blocks(path: Path, rows: int):
    lines = path.read_text().strip().splitlines()
    out = {}
    for k in range(0, len(lines), rows + 1):
        i, j = (int(v) for v in lines[k].split()[:2])
        out[(i, j)] = np.array(
            [[float(v) for v in ln.split()] for ln in lines[k + 1 : k + 1 + rows]]
        )
    return out


@pytest.mark.data
def test_covariance_rmse_on_real_fragment_matches_protocol_reading(shared_data):
    """gt.info is sum_p J^T J with J = [I, -[p]x] over the source-frame overlap, i.e. the
    information of small motions [t, omega]. The protocol plugs in x = [t, q_xyz] with
    q_xyz ~ omega / 2, so translation errors are measured as the overlap RMSE and rotation
    errors at half weight. Both facts are checked against the real points here."""
    from scipy.spatial import cKDTree

    demo = shared_data / "geotransformer_repo/demo"
    bench = (
        shared_data / "geotransformer_repo/3DMatch/metadata/benchmarks/3DMatch/7-scenes-redkitchen"
    )
    info = torch.from_numpy(_read_blocks(bench / "gt.info", 6)[(0, 6)])
    gt_np = np.load(demo / "gt.npy")
    src, ref = np.load(demo / "src.npy"), np.load(demo / "ref.npy")
    dist, _ = cKDTree(ref).query(src @ gt_np[:3, :3].T + gt_np[:3, 3])
    overlap = torch.from_numpy(src[dist < 0.0375])  # 1.5 voxels
    gt = torch.from_numpy(gt_np)
    for shift in ([0.1, 0.0, 0.0], [0.0, 0.05, 0.15]):
        delta = EYE.clone()
        delta[:3, 3] = torch.tensor(shift, dtype=torch.float64)
        est = gt @ delta  # the error motion acts in the source frame
        proxy, direct = (
            float(covariance_rmse(est, gt, info)),
            float(transform_rmse(overlap, est, gt)),
        )
        assert proxy == pytest.approx(direct, rel=0.02), (shift, proxy, direct)
    for deg in (2.0, 5.0):
        est = gt @ rot_z(deg)
        proxy, direct = (
            float(covariance_rmse(est, gt, info)),
            float(transform_rmse(overlap, est, gt)),
        )
        assert proxy == pytest.approx(0.5 * direct, rel=0.1), (deg, proxy, direct)
