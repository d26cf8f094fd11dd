"""Per-point input features for the backbone (collate computes them, the model checks its
input width against :data:`INPUT_FEATURE_DIMS`; both import them from here, floor 0).

``"ones"``: the constant 1 of GeoTransformer (all geometry is left to the KPConvs).
``"fpfh"``: the constant plus the 33-bin Fast Point Feature Histogram (Rusu et al., ICRA 2009;
Open3D's implementation) of every voxelised point. FPFH is built from angles between normals
and offsets, so it does not change when the cloud is rotated; it gives a rotation-invariant
backbone a description of the surface around each point out to ``fpfh_radius`` that does not
depend on a local frame (which edges and flat patches leave ill-defined). Open3D's three 11-bin
sub-histograms each sum to 200 (the point's own histogram plus its neighbors' weighted mean,
each normalised to 100); we scale every sub-histogram to sum to 1.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["INPUT_FEATURE_DIMS", "fpfh_features", "input_features"]

INPUT_FEATURE_DIMS = {"ones": 1, "fpfh": 34}


def fpfh_features(points: np.ndarray, normal_radius: float, fpfh_radius: float) -> np.ndarray:
    """FPFH ``(N, 33)`` float32 of ``points (N, 3)`` (metres), normals from neighbors within
    ``normal_radius`` (at most 30) oriented towards the cloud's centroid, histograms over
    neighbors within ``fpfh_radius`` (at most 100). Sub-histograms are scaled to sum to 1
    (a point without neighbors gets zeros)."""
    import open3d as o3d

    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(points, np.float64)))
    cloud.estimate_normals(o3d.geometry.KDTreeSearchParamHybrid(radius=normal_radius, max_nn=30))
    # Open3D leaves the normal signs to the eigen solver, which depends on the coordinates (a
    # rotated cloud gets other signs and other histograms: median L1 change 0.33 of 6 on a
    # room corner); pointing them at the centroid, which moves with the cloud, fixes that.
    cloud.orient_normals_towards_camera_location(cloud.get_center())
    feat = o3d.pipelines.registration.compute_fpfh_feature(
        cloud, o3d.geometry.KDTreeSearchParamHybrid(radius=fpfh_radius, max_nn=100)
    )
    hist = np.asarray(feat.data, dtype=np.float64).T.reshape(-1, 3, 11)
    total = hist.sum(-1, keepdims=True)
    hist = np.divide(hist, total, out=np.zeros_like(hist), where=total > 0)
    return hist.reshape(-1, 33).astype(np.float32)


def input_features(
    points: Tensor,
    lengths: Tensor,
    kind: str = "ones",
    fpfh_radii: tuple[float, float] = (0.1, 0.25),
) -> Tensor:
    """Features ``(ΣN, INPUT_FEATURE_DIMS[kind])`` float32 of packed clouds ``points (ΣN, 3)``
    with ``lengths (B,)``; FPFH is computed per cloud. ``fpfh_radii``: (normal, histogram)
    radius in metres."""
    if kind not in INPUT_FEATURE_DIMS:
        raise ValueError(
            f"input_features must be one of {sorted(INPUT_FEATURE_DIMS)}, got {kind!r}"
        )
    ones = torch.ones(points.shape[0], 1)
    if kind == "ones":
        return ones
    pts = points.detach().cpu().double().numpy()
    parts, start = [], 0
    for n in lengths.tolist():
        parts.append(fpfh_features(pts[start : start + n], *fpfh_radii))
        start += n
    return torch.cat([ones, torch.from_numpy(np.concatenate(parts, 0))], 1)
