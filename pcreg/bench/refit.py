"""The published ground truth of a real pair refit to its scans, to judge estimates that are
closer to the scans than the published pose is.

The published poses are not exact. 3DMatch's come from the reconstruction of each scene, and
on the redkitchen pairs of ``../shared/data`` the pose that best fits the two scans lies 1.0-1.3
deg and 4.7-10.7 cm from them (measured on a 2-core Intel Xeon, BENCHMARKS.md); there an
estimate can beat another on RMSE and rotation yet lose on translation error to the published
pose only because it is nearer the scans. KITTI's poses come from GPS/IMU, and the
registration benchmarks built on KITTI (FCGF, Choy et al. ICCV 2019, then Predator, CoFiNet
and GeoTransformer) refine every pair's relative pose with ICP before using it as ground
truth for the same reason.

:func:`refit_ground_truth` does that refinement: point-to-plane ICP from the published pose,
first at a coarse voxel, then at a fine one, with correspondences within 2 voxels and run to
convergence. It lands on the same pose from the published one and from a start moved by
15 cm indoors / 0.7 m outdoors (on the four real pairs, 0.000 deg and 0.00 cm apart; the
tests add a 2 deg turn).
"""

from __future__ import annotations

import numpy as np

from pcreg.baselines.icp import downsample_with_normals, icp_refine

__all__ = ["REFIT_VOXELS", "refit_ground_truth"]

# coarse, fine voxel in metres; the fine one is finer than the grids the registrations work
# on (5 cm / 0.3 m for both the networks and FPFH + RANSAC), so the refit favours none of them
REFIT_VOXELS = {"indoor": (0.05, 0.02), "outdoor": (0.3, 0.1)}


def refit_ground_truth(
    src: np.ndarray, ref: np.ndarray, published: np.ndarray, setting: str
) -> np.ndarray:
    """``T_ref_src`` (4, 4) float64: ``published`` (4, 4) refined by point-to-plane ICP on
    ``src``, ``ref`` ``(N, 3)`` (metres) at the ``setting``'s voxels (:data:`REFIT_VOXELS`)."""
    if setting not in REFIT_VOXELS:
        raise ValueError(f"setting must be one of {sorted(REFIT_VOXELS)}, got {setting!r}")
    transform = np.asarray(published, np.float64)
    for voxel in REFIT_VOXELS[setting]:
        transform = icp_refine(
            downsample_with_normals(src, voxel),
            downsample_with_normals(ref, voxel),
            transform,
            voxel,
            max_iterations=200,
            max_distance=2 * voxel,
            tolerance=1e-9,
        ).transform
    return transform
