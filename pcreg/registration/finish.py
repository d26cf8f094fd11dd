"""Steps 3-5 of the pipeline (:mod:`pcreg.registration.pipeline`) for one estimate: refine
it by point-to-plane ICP, verify and measure the fit, and give the result in the user's frame
and units."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from pcreg.registration.frames import to_user_frame
from pcreg.registration.memo import remembered
from pcreg.registration.result import RegistrationResult
from pcreg.registration.symmetry import (
    fit_clutter,
    fit_constraint,
    fit_detail,
    shift_probe,
    symmetry_probe,
)
from pcreg.registration.verdict import scene_size
from pcreg.registration.verify import agreement, verify

__all__ = [
    "ICP_ITERATIONS",
    "ICP_MORE",
    "ICP_MOVING",
    "ICP_PROBE",
    "ICP_TOLERANCE",
    "finish_estimate",
    "refine",
    "user_pose",
]

#: ICP of the pipeline: Open3D's relative fitness / RMSE change below which it stops, and its
#: iteration cap. At Open3D's usual 1e-6 / 30 two starts 0.5 deg apart ended 0.06 deg apart
#: (3DMatch pair 0 <- 5); at 1e-8 / 100 0.002 deg, for no measurable extra time.
ICP_TOLERANCE = 1e-8
ICP_ITERATIONS = 100
#: an ICP still moving at its cap (a slide along a poorly constrained direction: a road, a
#: corridor) runs up to this many steps more from where it stopped. Found on real scans
#: (``python tools/real_classes.py``, seed 0, case 177): a crop of a KITTI 00 scan stopped
#: at step 100 fitting 43 % of the source, 0.85 m and 1.8 deg from the truth, and was
#: registered there (score 0.91); it converges at step 122, fitting 80 %, on the truth
#: (0.07 deg, 2 cm). Of 124 default registrations (one draw of each zero-shot pair, two
#: rounds of the real classes) 8 ICPs reached the cap, all of them on negatives or wrong
#: estimates (fitness 0.09-0.26), and needed 5-244 more steps to settle.
ICP_MORE = 100
#: ... but only where it is still *going* somewhere: :data:`ICP_PROBE` more steps move the
#: source's points (root mean square) by at least :data:`ICP_MOVING` voxels. Measured per
#: step at the cap: that KITTI crop slid 0.13-0.18 m and 0.19-0.25 deg per step (its points
#: 4.4 voxels in 10 steps); the KITTI pair 94 -> 95 under 0.4 m Gaussian noise, registered
#: right, crept: its points moved 0.024 m (0.08 voxel) in the 10 steps after the cap and
#: 0.12 m in 100, its fitness 0.787 before and 0.786 after, and the 200 steps took 3.5 s of
#: its 6.2-6.3 s (51,000 points at 0.3 m; 4.6 s in all with this rule)
ICP_PROBE = 10
ICP_MOVING = 0.5


def _voxelised(points: np.ndarray, voxel: float) -> Any:
    """:func:`pcreg.geometry.clouds.downsample_with_normals` of ``points (N, 3)`` at
    ``voxel``, kept for the rest of the registration
    (:func:`~pcreg.registration.memo.once_per_registration`, keyed by the array itself: the
    pipeline's working-frame clouds are new arrays per registration and never written in
    place; a mirrored source is another array). A LiDAR pair that reaches FPFH + RANSAC
    finishes three estimates on the same two clouds: six voxelisations (0.41 s on two KITTI
    highway scans), now two. The cloud is shared: ICP, the verification and the probe only
    read it."""
    from pcreg.geometry.clouds import downsample_with_normals

    return remembered(("voxelised", id(points), float(voxel)),
                      lambda: downsample_with_normals(points, voxel), holds=points)  # fmt: skip


def _reference_view(plan: Any, ref_down: Any, origins: np.ndarray) -> Any:
    """The voxelised reference's :class:`~pcreg.geometry.visibility.ReferenceView` from the
    user's origin (``-origins[1]`` in the working frame), once per registration: a room's
    only where it looks like its sensor's view from there
    (:func:`~pcreg.geometry.visibility.sensor_view`); streets from any eye near them
    (BENCHMARKS.md, "Free space")."""
    from pcreg.geometry.visibility import ReferenceView, sensor_view

    eye = -np.asarray(origins[1], np.float64)
    voxel = plan.setting.voxel_size
    points = np.asarray(ref_down.points)

    def build() -> ReferenceView:
        sensor = None
        if plan.setting.name != "outdoor":
            sensor = sensor_view(points, np.asarray(ref_down.normals), eye, voxel)
        return ReferenceView(points, eye, sensor)

    key = ("reference view", id(ref_down), tuple(np.round(eye, 9)), voxel, plan.setting.name)
    return remembered(key, build, holds=ref_down)


def finish_estimate(
    result: RegistrationResult,
    plan: Any,
    src: np.ndarray,
    ref: np.ndarray,
    start: float,
    origins: np.ndarray,
    *,
    icp: bool,
    scale: float = 1.0,
    support: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    probe: bool = True,
    icp_iterations: int = ICP_ITERATIONS,
    refined: Any = None,
    refined_seconds: float = 0.0,
) -> RegistrationResult:
    """ICP when asked (``icp``; in the working frame), the verification of the estimate
    (:func:`~pcreg.registration.verify.verify`, at the setting's voxel: its contrast is the
    result's confidence), then the result in the user's frame (:func:`to_user_frame`), its
    arrays' dtypes and shapes, and the total time since ``start``. ``plan``: the pipeline's
    plan (its voxel and setting). ``src``, ``ref``: the working-frame clouds ``(N, 3)``,
    ``(M, 3)`` float64, shifted by ``origins (2, 3)``. ``scale``: the clouds (and ``origins``)
    were multiplied by it (:mod:`~pcreg.registration.scale`); the result is divided back into
    the user's units. ``support``: a network's correspondences ``(src (K, 3), ref (K, 3),
    scores (K,))`` in the same frame to measure the estimate's agreement with, for an
    estimate the network did not make (FPFH + RANSAC's). ``probe``: also measure the margin
    to the best different pose (the symmetry probe) and the fit's constraint (False: only
    the fit is wanted, as by the mirror check). ``icp_iterations``: ICP's cap. ``refined``:
    :func:`refine`'s result for this estimate with this cap where it already ran (``auto``
    runs FPFH + RANSAC's ICP beside the network's pass from its pose), and the seconds it
    took."""
    net = support  # the network's own correspondences, which ICP's replace
    if result.method == "geotransformer":
        net = (result.src_corr_points, result.ref_corr_points, result.corr_scores)
    down = None  # ICP's voxelised clouds, which the verification reuses at its voxel
    if icp:
        t0 = time.perf_counter()
        src_down = _voxelised(src, plan.voxel)
        ref_down = _voxelised(ref, plan.voxel)
        if plan.voxel == plan.setting.voxel_size:
            down = (np.array(src_down.points), np.array(ref_down.points))
        if refined is None:
            refined = refine(result.transform, plan, src, ref, icp_iterations,
                             clouds=(src_down, ref_down))  # fmt: skip
        result.timings["icp"] = refined_seconds or time.perf_counter() - t0
        result.transform = refined.transform
        result.src_corr_points = refined.src_corr_points
        result.ref_corr_points = refined.ref_corr_points
        result.corr_scores = np.ones(len(refined.src_corr_points))
        result.icp = True
    t0 = time.perf_counter()
    agrees = None
    if net is not None:  # within the inlier radius as the network saw the pair (its scale)
        agrees = agreement(*net, result.transform, plan.setting.inlier_radius / plan.network_scale)
    # at the setting's voxel, where its thresholds were measured (not a --voxel-size)
    check = verify(*(down or (src, ref)), result.transform, plan.setting.voxel_size, agrees,
                   voxelised=down is not None)  # fmt: skip
    if check.inliers and probe:  # the margin to the best different pose
        if down is None:
            src_down = _voxelised(src, plan.setting.voxel_size)
            ref_down = _voxelised(ref, plan.setting.voxel_size)
        probe_at = (src_down, ref_down, result.transform, plan.setting.voxel_size,
                    src.mean(axis=0), scene_size(ref))  # fmt: skip
        margin, pose = symmetry_probe(*probe_at)
        shift, shifted = shift_probe(*probe_at)
        check = replace(
            check,
            probe_margin=margin,
            constraint=fit_constraint(
                src_down, ref_down, result.transform, plan.setting.voxel_size
            ),
            probe_pose=None if pose is None else user_pose(pose, scale, origins),
            shift_margin=shift,
            shift_pose=None if shifted is None else user_pose(shifted, scale, origins),
            # the verdict rules on it in rooms only (12 ms on a KITTI pair, one thread)
            detail=None
            if plan.setting.name == "outdoor"
            else fit_detail(src_down, ref_down, result.transform, plan.setting.voxel_size),
            clutter=None
            if plan.setting.name == "outdoor"
            else fit_clutter(src_down, ref_down, result.transform, plan.setting.voxel_size),
            # the reference seen from its own origin (the user's), in the working frame
            free_space=_reference_view(plan, ref_down, origins).free_space(
                np.asarray(src_down.points), result.transform, plan.setting.voxel_size
            ),
        )
    result.timings["verify"] = time.perf_counter() - t0
    result.verification = check
    result.confidence = float(np.clip(check.contrast, 0.0, 1.0))
    result.fitness = check.fitness
    if scale != 1.0:
        result.transform = result.transform.copy()
        result.transform[:3, 3] /= scale
        result.src_corr_points = np.asarray(result.src_corr_points, np.float64) / scale
        result.ref_corr_points = np.asarray(result.ref_corr_points, np.float64) / scale
        result.voxel_size /= scale
        result.scale = scale
        origins = origins / scale
    to_user_frame(result, origins)
    result.corr_scores = np.asarray(result.corr_scores, np.float64).reshape(-1)
    result.timings["total"] = time.perf_counter() - start
    return result


def refine(
    transform: np.ndarray,
    plan: Any,
    src: np.ndarray,
    ref: np.ndarray,
    icp_iterations: int = ICP_ITERATIONS,
    clouds: tuple[Any, Any] | None = None,
) -> Any:
    """The pipeline's ICP of the estimate ``transform (4, 4)`` on the working-frame clouds
    ``src (N, 3)``, ``ref (M, 3)`` voxelised at the plan's voxel (each once per registration;
    ``clouds``: those voxelised clouds, where the caller has them): a
    :class:`~pcreg.baselines.icp.IcpResult`, as :func:`finish_estimate` runs it."""
    from pcreg.baselines.icp import icp_refine

    src_down, ref_down = clouds or (_voxelised(src, plan.voxel), _voxelised(ref, plan.voxel))
    points = np.asarray(src_down.points)
    out = icp_refine(src_down, ref_down, transform, plan.voxel, icp_iterations,
                     tolerance=ICP_TOLERANCE)  # fmt: skip
    if ICP_MORE > 0 and icp_iterations >= ICP_ITERATIONS and out.iterations >= icp_iterations:
        # at the cap: on to where it settles (ICP_MORE) if it is still going somewhere
        probe = icp_refine(src_down, ref_down, out.transform, plan.voxel,
                           min(ICP_PROBE, ICP_MORE), tolerance=ICP_TOLERANCE)  # fmt: skip
        moves = points @ (probe.transform - out.transform)[:3, :3].T
        moves += (probe.transform - out.transform)[:3, 3]  # each source point's step
        moved = float(np.sqrt((moves**2).sum(axis=1).mean()))
        more = probe
        going = probe.iterations >= ICP_PROBE and moved >= ICP_MOVING * plan.voxel
        if going and ICP_MORE > ICP_PROBE:
            more = icp_refine(src_down, ref_down, probe.transform, plan.voxel,
                              ICP_MORE - ICP_PROBE, tolerance=ICP_TOLERANCE)  # fmt: skip
            more = replace(more, iterations=probe.iterations + more.iterations)
        out = replace(more, iterations=out.iterations + more.iterations)
    return out


def user_pose(pose: np.ndarray, scale: float, origins: np.ndarray) -> np.ndarray:
    """A working-frame pose ``(4, 4)`` (clouds scaled by ``scale``, shifted by ``origins``,
    also scaled) in the user's frame and units, as pipeline maps the
    estimate."""
    out = np.asarray(pose, np.float64).copy()
    out[:3, 3] /= scale
    o_src, o_ref = np.asarray(origins, np.float64) / scale
    out[:3, 3] += o_ref - out[:3, :3] @ o_src
    return out
