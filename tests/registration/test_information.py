"""The information matrix without Open3D: Open3D's ``get_information_matrix_from_point_clouds``
(called with the roles swapped, on the thinned clouds) on the real 3DMatch and KITTI pairs and
on generated clouds, and the residual variance of the same correspondences."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg.registration.information import (
    INFORMATION_VOXELS,
    information_matrix,
    pose_covariance,
    residual_variance,
)

o3d = pytest.importorskip("open3d")


def _thinned(points: np.ndarray, voxel: float):
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(points, np.float64)))
    return cloud.voxel_down_sample(voxel)


def _open3d_information(src, ref, transform, voxel) -> np.ndarray:
    """What :func:`information_matrix` computed with Open3D before."""
    return np.asarray(
        o3d.pipelines.registration.get_information_matrix_from_point_clouds(
            _thinned(ref, voxel),
            _thinned(src, voxel),
            INFORMATION_VOXELS * voxel,
            np.linalg.inv(transform),
        )
    )


def _open3d_variance(src, ref, transform, voxel) -> tuple[float, int]:
    """What :func:`residual_variance` computed on Open3D's thinned clouds and scipy's tree."""
    from scipy.spatial import cKDTree

    t = np.linalg.inv(transform)
    moved = np.asarray(_thinned(ref, voxel).points) @ t[:3, :3].T + t[:3, 3]
    dist, _ = cKDTree(np.asarray(_thinned(src, voxel).points)).query(
        moved, distance_upper_bound=INFORMATION_VOXELS * voxel
    )
    near = dist[np.isfinite(dist)]
    return float(np.mean(near**2)) / 3.0, len(near)


def _check(src, ref, transform, voxel) -> None:
    want = _open3d_information(src, ref, transform, voxel)
    ours = information_matrix(src, ref, transform, voxel)
    assert want[5, 5] > 100  # the clouds do overlap: the check can fail
    np.testing.assert_allclose(ours, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    variance, count = residual_variance(src, ref, transform, voxel)
    want_variance, want_count = _open3d_variance(src, ref, transform, voxel)
    assert count == want_count == int(want[5, 5])
    assert variance == pytest.approx(want_variance, rel=1e-12)


@pytest.mark.open3d
@pytest.mark.data
def test_information_is_open3ds_on_the_real_pairs(shared_data):
    from pcreg.bench.real_pairs import real_pairs
    from pcreg.io import read_points

    pairs = [p for p in real_pairs(shared_data) if p.name in ("3DMatch 0<-6", "KITTI 95<-94")]
    assert len(pairs) == 2
    for p in pairs:
        voxel = 0.05 if p.setting == "indoor" else 0.3
        src, ref = (read_points(q).astype(np.float64) for q in (p.src, p.ref))
        gt = np.asarray(p.gt, np.float64)
        off = gt.copy()
        off[:3, 3] += 0.5 * voxel
        for transform in (gt, off):
            _check(src, ref, transform, voxel)


def test_information_is_open3ds_on_a_generated_room(room_pair):
    src, ref, gt = room_pair
    _check(src.astype(np.float64), ref.astype(np.float64), gt, 0.05)
    # far from any origin (the covariance is computed about the source's median)
    shift = np.eye(4)
    shift[:3, 3] = [3.0e5, -2.0e5, 50.0]
    moved_src = src.astype(np.float64) + shift[:3, 3]
    _, cov, count = pose_covariance(moved_src, ref, gt @ np.linalg.inv(shift), 0.05, kind=None)
    _, _, near_origin = pose_covariance(src.astype(np.float64), ref, gt, 0.05, kind=None)
    assert count == near_origin and np.isfinite(cov).all()
