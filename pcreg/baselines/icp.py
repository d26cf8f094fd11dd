"""Point-to-plane ICP refinement with Open3D (Chen & Medioni 1992), the one setting every
pipeline in pcreg uses: both clouds voxel-downsampled, normals from 2-voxel neighborhoods,
correspondences within 1 voxel."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["IcpResult", "downsample_with_normals", "icp_refine"]


@dataclass
class IcpResult:
    """``transform (4, 4) float64`` ``T_ref_src``; the final nearest-neighbor correspondences
    ``(K, 3) float64`` (source and reference coordinates, metres); Open3D's fitness (fraction of
    source points with a partner) and inlier RMSE (metres)."""

    transform: np.ndarray
    src_corr_points: np.ndarray
    ref_corr_points: np.ndarray
    fitness: float
    inlier_rmse: float


def downsample_with_normals(points: np.ndarray, voxel_size: float):
    """An Open3D cloud of ``points (N, 3)`` voxel-downsampled at ``voxel_size`` metres with
    normals estimated from neighbors within 2 voxels (at most 30)."""
    import open3d as o3d

    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(points, np.float64)))
    down = cloud.voxel_down_sample(voxel_size)
    down.estimate_normals(o3d.geometry.KDTreeSearchParamHybrid(radius=2 * voxel_size, max_nn=30))
    return down


def icp_refine(
    src_points,
    ref_points,
    init: np.ndarray,
    voxel_size: float,
    max_iterations: int = 30,
    *,
    max_distance: float | None = None,
    tolerance: float = 1e-6,
) -> IcpResult:
    """Refine ``init`` (``T_ref_src``) with point-to-plane ICP.

    ``src_points`` / ``ref_points`` are ``(N, 3)`` arrays or clouds already made by
    :func:`downsample_with_normals` (to reuse them). ``max_distance``: correspondence
    distance in metres (default: ``voxel_size``); ``tolerance``: stop when fitness and inlier
    RMSE change by less than this fraction (Open3D's relative criteria)."""
    import open3d as o3d

    reg = o3d.pipelines.registration
    src = src_points if isinstance(src_points, o3d.geometry.PointCloud) else None
    ref = ref_points if isinstance(ref_points, o3d.geometry.PointCloud) else None
    src = src or downsample_with_normals(src_points, voxel_size)
    ref = ref or downsample_with_normals(ref_points, voxel_size)
    out = reg.registration_icp(
        src,
        ref,
        voxel_size if max_distance is None else max_distance,
        np.asarray(init, np.float64),
        reg.TransformationEstimationPointToPlane(),
        reg.ICPConvergenceCriteria(tolerance, tolerance, max_iterations),
    )
    corr = np.asarray(out.correspondence_set, dtype=np.int64).reshape(-1, 2)
    return IcpResult(
        np.asarray(out.transformation).copy(),
        np.asarray(src.points)[corr[:, 0]],
        np.asarray(ref.points)[corr[:, 1]],
        float(out.fitness),
        float(out.inlier_rmse),
    )
