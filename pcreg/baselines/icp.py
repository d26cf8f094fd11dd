"""Point-to-plane ICP refinement (Chen & Medioni 1992), the one setting every pipeline in pcreg
uses: both clouds voxel-downsampled, normals from 2-voxel neighborhoods, correspondences within
1 voxel.

:func:`point_to_plane_icp` is Open3D's ``registration_icp`` with
``TransformationEstimationPointToPlane`` in numpy over a k-d tree, step for step: the same
correspondences (each moved source point's nearest reference point within the distance), the
same Gauss-Newton step (the normal equations of the linearised point-to-plane residuals, solved
for a rotation ``Rz Ry Rx`` and a translation applied on the left), the same stopping rule (the
fitness and the inlier RMSE both change by less than the tolerance) and the same fitness and
inlier RMSE. One addition: it also stops where the fitness and RMSE repeat those of any of the
last :data:`CYCLE` (8) states. The correspondences can cycle through a few sets, and Open3D's
rule then never holds: on the KITTI pair 199/198 ICP from the network's estimate ran all 100
steps (0.43 s of a 1.36 s registration) in a cycle of two states 1e-4 deg and 2e-5 m apart; it
stopped after 9 (0.99 s) once a repeat of the last two ended it. On the KITTI training pair
06 0 -> 9 (11 m apart) it then still ran all 100 steps (0.67 s of a 3.1-3.4 s registration)
in a cycle of three, 1e-4 deg apart from the 11th step; with eight it stops after 14, and the
registration takes 2.5-2.7 s with the same transform to 0.02 deg. On the 52 KITTI training
pairs the default registration's transforms stayed the same to 0.2 mm and its verdicts all the
same with the rule of two (the pairs whose ICP took over 0.3 s went from 6 to 4), and with the
rule of eight the errors against the truth moved by at most 6e-5 deg and 6e-6 m, the verdicts
the same (``tests/baselines/test_icp.py``). It does not import Open3D (0.4-0.5 s of the
registration path's start). On the real 3DMatch pair and the KITTI pair 94/95 (the pipeline's
100 steps at tolerance 1e-8, from 3 and 8 degrees off) its transforms are within 8e-13 of
Open3D's in rotation and 7e-11 voxel in translation, the fitness equal and the RMSE within 2e-12
relative, the correspondences the same (``tests/baselines/test_icp.py``). The nearest neighbours
come from pykdtree (:class:`pcreg.geometry.clouds.KdTree`) on ``workers`` threads (one unless
the caller passes :func:`pcreg.engine.threads.current_threads`, the count fitted to the free
cores). One thread each on the 2-core development VM, median of 5: 13 ms against Open3D's 22 ms
on the 3DMatch pair (4k voxels each), 78 and 237 ms against 91 and 379 ms on the KITTI pair (17k
voxels each) from 3 and 8 degrees off; with two threads each 8 against 14 ms and 129-226 against
85-231 ms (a neighbour's process held one of the cores).

:func:`downsample_with_normals` still makes Open3D clouds, for the callers that compute FPFH
features on them (:mod:`pcreg.baselines.fpfh_ransac`, :mod:`pcreg.registration.inside`);
:func:`pcreg.geometry.clouds.downsample_with_normals` makes the same points and normals without
Open3D, and :func:`icp_refine` takes either.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CYCLE", "IcpResult", "downsample_with_normals", "icp_refine", "point_to_plane_icp"]

#: ICP also stops where the fitness and inlier RMSE repeat those of any of this many states
#: before: the correspondences can settle into a cycle of several sets (module doc)
CYCLE = 8

#: Gauss-Newton steps where the pairs hold some motion of the source less firmly than this
#: (:func:`_pinned_least`, unit-free) are solved in the least-squares sense about the pairs'
#: centroid with that cut-off, instead of Open3D's plain solve: the directions the pairs do
#: not determine get no motion. The pairs of two clouds of uniform noise (normals of no
#: surface) made np.linalg.solve step 9e15 m; normals tilted 1e-6 off one plane, 1.8 km.
ILL_POSED = 1e-6
#: the most pairs :func:`_pinned_least` looks at (a per-pair mean, as well estimated by these)
PINNED_PAIRS = 2000


@dataclass
class IcpResult:
    """``transform (4, 4) float64`` ``T_ref_src``; the final nearest-neighbor correspondences
    ``(K, 3) float64`` (source and reference coordinates, metres; in the source's order);
    Open3D's fitness (fraction of source points with a partner) and inlier RMSE (metres)."""

    transform: np.ndarray
    src_corr_points: np.ndarray
    ref_corr_points: np.ndarray
    fitness: float
    inlier_rmse: float
    #: Gauss-Newton steps taken
    iterations: int = 0


def downsample_with_normals(points: np.ndarray, voxel_size: float) -> Any:
    """An Open3D cloud of ``points (N, 3)`` voxel-downsampled at ``voxel_size`` metres with
    normals estimated from neighbors within 2 voxels (at most 30): for FPFH features. Imports
    Open3D; :func:`pcreg.geometry.clouds.downsample_with_normals` gives the same points and
    normals as a :class:`~pcreg.geometry.clouds.Cloud` without it."""
    import open3d as o3d

    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(points, np.float64)))
    down = cloud.voxel_down_sample(voxel_size)
    down.estimate_normals(o3d.geometry.KDTreeSearchParamHybrid(radius=2 * voxel_size, max_nn=30))
    return down


def _euler_zyx(x: np.ndarray) -> np.ndarray:
    """Open3D's ``TransformVector6dToMatrix4d``: ``(6,)`` ``(rx, ry, rz, tx, ty, tz)`` to the
    ``(4, 4)`` transform with rotation ``Rz(rz) @ Ry(ry) @ Rx(rx)`` (radians)."""
    cx, cy, cz = np.cos(x[:3])
    sx, sy, sz = np.sin(x[:3])
    out = np.eye(4)
    out[:3, :3] = [
        [cz * cy, cz * sy * sx - sz * cx, cz * sy * cx + sz * sx],
        [sz * cy, sz * sy * sx + cz * cx, sz * sy * cx - cz * sx],
        [-sy, cy * sx, cy * cx],
    ]
    out[:3, 3] = x[3:]
    return out


def _step(moved: np.ndarray, ref_pts: np.ndarray, ref_normals: np.ndarray) -> np.ndarray:
    """Open3D's point-to-plane ``ComputeTransformation``: the ``(4, 4)`` update from the
    paired moved source points and reference points and normals (``(K, 3)`` each); the identity
    where there are no pairs. Where the pairs leave a motion nearly free (under
    :data:`ILL_POSED`), the cut-off least-squares step instead (:func:`_cut_off_step`)."""
    if not len(moved):
        return np.eye(4)
    residual = np.einsum("ij,ij->i", moved - ref_pts, ref_normals)
    if not (np.isfinite(residual).all() and np.isfinite(moved).all()):
        return np.eye(4)  # no step from pairs that are not numbers
    if _pinned_least(moved, ref_normals) >= ILL_POSED:
        jac = np.concatenate([np.cross(moved, ref_normals), ref_normals], axis=1)  # (K, 6)
        lhs, rhs = jac.T @ jac, -(jac.T @ residual)
        try:
            return _euler_zyx(np.linalg.solve(lhs, rhs))
        except np.linalg.LinAlgError:
            pass
    return _cut_off_step(moved, ref_normals, residual)


def _centred_jacobian(
    moved: np.ndarray, normals: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """The point-to-plane Jacobian ``(K, 6)`` about the pairs' centroid ``c``, its rotation
    columns divided by the pairs' RMS distance ``L`` from it (so that all six are in metres
    per metre of motion); returns it, ``c`` and ``L``."""
    centre = moved.mean(axis=0)
    offset = moved - centre
    length = max(float(np.sqrt(np.einsum("ij,ij->", offset, offset) / len(moved))), 1e-12)
    return np.concatenate([np.cross(offset, normals) / length, normals], axis=1), centre, length


def _pinned_least(moved: np.ndarray, normals: np.ndarray) -> float:
    """The smallest eigenvalue of the centred, scaled normal matrix per pair (unit-free, in
    [0, 1]): how firmly the least determined motion of the source is held. It does not
    depend on where the clouds lie (UTM coordinates included) or on their units. Real
    3DMatch and KITTI pairs hold 0.07-0.11 at the truth (the verdict's ``constraint``); a
    plane or a corridor leaves 0 along its slide. Measured on at most :data:`PINNED_PAIRS`
    evenly strided pairs: it is checked at every step, and on all 17k pairs of a KITTI scan
    it cost 10 % of ICP's time."""
    stride = max(1, len(moved) // PINNED_PAIRS)
    jac, _, _ = _centred_jacobian(moved[::stride], normals[::stride])
    return float(np.linalg.eigvalsh(jac.T @ jac / len(jac))[0])


def _cut_off_step(moved: np.ndarray, normals: np.ndarray, residual: np.ndarray) -> np.ndarray:
    """The Gauss-Newton step of a nearly singular system: least squares about the pairs'
    centroid, in scaled unknowns, with the directions held under :data:`ILL_POSED` cut off
    (they get no motion)."""
    jac, centre, length = _centred_jacobian(moved, normals)
    lhs, rhs = jac.T @ jac, -(jac.T @ residual)
    step = np.linalg.lstsq(lhs, rhs, rcond=ILL_POSED)[0]
    out = _euler_zyx(np.concatenate([step[:3] / length, np.zeros(3)]))
    out[:3, 3] = step[3:] + centre - out[:3, :3] @ centre  # turned about the centroid
    return out


def point_to_plane_icp(
    src: np.ndarray,
    ref: np.ndarray,
    ref_normals: np.ndarray,
    init: np.ndarray,
    max_distance: float,
    max_iterations: int = 30,
    tolerance: float = 1e-6,
    *,
    tree: Any = None,
    workers: int = 1,
) -> IcpResult:
    """Open3D's point-to-plane ``registration_icp``, in numpy (see the module doc).

    Args:
        src: ``(N, 3)`` float64 source points.
        ref: ``(M, 3)`` float64 reference points; ``ref_normals (M, 3)`` their unit normals.
        init: ``(4, 4)`` initial ``T_ref_src``.
        max_distance: correspondence distance, in the points' units (metres).
        max_iterations: most Gauss-Newton steps.
        tolerance: stop once the fitness and the inlier RMSE both change by less than this
            (absolute, as Open3D's ``relative_fitness`` / ``relative_rmse``).
        tree: a :class:`pcreg.geometry.clouds.KdTree` of ``ref``, to reuse one.
        workers: threads of the nearest-neighbour queries.

    Returns:
        :class:`IcpResult`: the refined transform, the correspondences at it (source order),
        the fitness (paired share of ``src``) and the inlier RMSE (root mean square distance
        of the pairs; 0 without pairs).
    """
    from pcreg.geometry.clouds import KdTree

    if not max_distance > 0:
        raise ValueError(f"max_distance must be positive, got {max_distance}")
    src = np.asarray(src, np.float64).reshape(-1, 3)
    ref = np.asarray(ref, np.float64).reshape(-1, 3)
    ref_normals = np.asarray(ref_normals, np.float64).reshape(-1, 3)
    transform = np.array(init, np.float64)
    if not len(src) or not len(ref):
        empty = np.zeros((0, 3))
        return IcpResult(transform, empty, empty, 0.0, 0.0)
    tree = tree if tree is not None else KdTree(ref)
    moved = src @ transform[:3, :3].T + transform[:3, 3]

    def pair(points: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
        dist, idx = tree.query(points, distance_upper_bound=max_distance, workers=workers)
        near = np.flatnonzero(np.isfinite(dist))
        if not len(near):
            return near, near, 0.0, 0.0
        rmse = float(np.sqrt(np.dot(dist[near], dist[near]) / len(near)))
        return near, idx[near], len(near) / len(points), rmse

    src_idx, ref_idx, fitness, rmse = pair(moved)
    history = deque([(fitness, rmse)], maxlen=CYCLE)  # a repeat of any of these ends it
    steps = 0
    while steps < max_iterations:
        steps += 1
        update = _step(moved[src_idx], ref[ref_idx], ref_normals[ref_idx])
        transform = update @ transform
        moved = moved @ update[:3, :3].T + update[:3, 3]
        src_idx, ref_idx, fitness, rmse = pair(moved)
        if any(abs(f - fitness) < tolerance and abs(r - rmse) < tolerance
               for f, r in history):  # fmt: skip
            break
        history.append((fitness, rmse))
    return IcpResult(transform, src[src_idx], ref[ref_idx], fitness, rmse, steps)


def icp_refine(
    src_points: Any,
    ref_points: Any,
    init: np.ndarray,
    voxel_size: float,
    max_iterations: int = 30,
    *,
    max_distance: float | None = None,
    tolerance: float = 1e-6,
    workers: int = 1,
) -> IcpResult:
    """Refine ``init`` (``T_ref_src``) with point-to-plane ICP (:func:`point_to_plane_icp`).

    ``src_points`` / ``ref_points`` are ``(N, 3)`` arrays (voxel-downsampled here at
    ``voxel_size`` metres, normals from 2 voxels) or clouds already made by
    :func:`pcreg.geometry.clouds.downsample_with_normals` or :func:`downsample_with_normals`
    (Open3D's; to reuse them; the reference's normals are required). ``max_distance``:
    correspondence distance in metres (default: ``voxel_size``); ``tolerance``: stop when
    fitness and inlier RMSE change by less than this (Open3D's "relative" criteria, which
    are absolute differences); ``workers``: threads of the neighbour searches (the registration
    path passes :func:`pcreg.engine.threads.current_threads`)."""
    from pcreg.geometry.clouds import Cloud, as_cloud
    from pcreg.geometry.clouds import downsample_with_normals as numpy_down

    src, ref = (
        as_cloud(p)
        if isinstance(p, Cloud) or hasattr(p, "points")
        else numpy_down(p, voxel_size, workers=workers)
        for p in (src_points, ref_points)
    )
    if not ref.has_normals():
        raise ValueError("point-to-plane ICP needs the reference cloud's normals")
    return point_to_plane_icp(
        src.points,
        ref.points,
        ref.normals,
        init,
        voxel_size if max_distance is None else max_distance,
        max_iterations,
        tolerance,
        workers=workers,
    )
