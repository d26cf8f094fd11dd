"""FPFH features + RANSAC (+ optional point-to-plane ICP), Open3D's classical global
registration pipeline (Rusu et al., "Fast Point Feature Histograms", ICRA 2009; Open3D's
global-registration tutorial settings: normals at 2 voxels, FPFH at 5 voxels, 1.5-voxel
inlier distance, edge-length checker 0.9, 100k iterations at confidence 0.999, no mutual filter).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

from pcreg.baselines.icp import downsample_with_normals, icp_refine
from pcreg.baselines.ransac_cost import checker_pass_share, iteration_cap

__all__ = [
    "ClassicalResult",
    "fpfh_ransac",
]

logger = logging.getLogger(__name__)


@dataclass
class ClassicalResult:
    """Output of :func:`fpfh_ransac`.

    Attributes:
        transform: ``(4, 4) float64`` ``T_ref_src``.
        src_corr_points, ref_corr_points: ``(K, 3) float64`` the correspondences of the last
            stage (RANSAC inliers, or ICP's nearest neighbors with ``icp=True``), source and
            reference coordinates in metres.
        fitness: fraction of downsampled source points with a reference point within the
            inlier distance after alignment.
        inlier_rmse: RMSE of those inliers, metres.
        timings: seconds per stage (``features``, ``matching``, ``ransac_share`` with a
            budget, ``ransac``, ``icp``).
        iterations: RANSAC's iteration cap (``max_iterations``, or fewer under a budget);
            a run that converges stops before it.
    """

    transform: np.ndarray
    src_corr_points: np.ndarray
    ref_corr_points: np.ndarray
    fitness: float
    inlier_rmse: float
    timings: dict[str, float] = field(default_factory=dict)
    iterations: int = 0


def _prepare(points: np.ndarray, voxel_size: float, keep: int | None = None, seed: int = 0):
    """The cloud downsampled at ``voxel_size`` with normals, and its FPFH features; ``keep``:
    at most that many of the downsampled points (a seeded random subset), each with the
    feature it has in the whole downsampled cloud (its neighbours are not thinned)."""
    import open3d as o3d

    down = downsample_with_normals(points, voxel_size)
    param = o3d.geometry.KDTreeSearchParamHybrid(radius=5 * voxel_size, max_nn=100)
    if keep is None or len(down.points) <= keep:
        return down, o3d.pipelines.registration.compute_fpfh_feature(down, param)
    idx = np.sort(np.random.default_rng(seed).choice(len(down.points), keep, replace=False))
    try:
        fpfh = o3d.pipelines.registration.compute_fpfh_feature(down, param, idx)
    except TypeError:  # Open3D before 0.20 takes no indices: the whole cloud's, then the rows
        fpfh = o3d.pipelines.registration.Feature()
        whole = o3d.pipelines.registration.compute_fpfh_feature(down, param)
        fpfh.data = np.asarray(whole.data)[:, idx]
    return down.select_by_index(idx), fpfh


def fpfh_ransac(
    src_points: np.ndarray,
    ref_points: np.ndarray,
    voxel_size: float,
    *,
    icp: bool = False,
    max_iterations: int = 100_000,
    confidence: float = 0.999,
    mutual_filter: bool = False,
    seed: int = 0,
    max_queries: int | None = None,
    budget_s: float | None = None,
) -> ClassicalResult:
    """Register ``src_points (N, 3)`` onto ``ref_points (M, 3)`` (metres) with FPFH + RANSAC.

    Args:
        voxel_size: downsampling voxel in metres (0.05 indoors, 0.3 outdoors are usual).
        icp: refine with point-to-plane ICP (1-voxel correspondence distance) on the
            downsampled clouds.
        max_iterations, confidence: RANSAC convergence criteria.
        mutual_filter: keep only mutual nearest feature matches.
        seed: Open3D's global random seed for RANSAC (results are reproducible per seed).
        max_queries: match at most this many downsampled source points (a random subset,
            seeded by ``seed``; each keeps the feature it has in the whole cloud), all
            where None. RANSAC's feature matching, a nearest-neighbour search in FPFH's 33
            dimensions per source point, is where its time goes, and the iteration count
            hardly matters: on two KITTI highway scans (34k and 29k points at 0.3 m) it took
            3.3 s at 100k iterations and 3.2 s at 1k, 0.6 s for 5k source points (2-core
            AMD EPYC, Open3D 0.20).
        budget_s: RANSAC's iterations are capped so that they take about this many seconds
            (None: ``max_iterations`` alone; ignored with ``mutual_filter``, which Open3D
            matches itself). A pair whose every 3-point sample passes the checkers pays for
            a validation at each iteration: an object against its mirror image (a triangle
            and its mirror image are congruent), a corridor or a floor (every sample
            slides). The Stanford bunny's 1,889 mesh vertices against their mirror image
            took 7.5 s at 100,000 iterations (about 200 us each), where real pairs take
            0.25-0.3 s for 100,000 (3DMatch demo pair, KITTI 01 at 5,000 queries). The
            cap follows from the share of seeded samples that pass the checkers
            (:mod:`pcreg.baselines.ransac_cost`), never from a timing, so a pair's result
            is the same on every machine; any pair that is not that slow runs as without
            a budget.
    """
    import open3d as o3d

    reg = o3d.pipelines.registration
    o3d.utility.random.seed(int(seed))
    timings: dict[str, float] = {}
    start = time.perf_counter()
    src_down, src_fpfh = _prepare(src_points, voxel_size, max_queries, seed)
    ref_down, ref_fpfh = _prepare(ref_points, voxel_size)
    timings["features"] = time.perf_counter() - start
    dist = 1.5 * voxel_size
    start = time.perf_counter()
    estimation = reg.TransformationEstimationPointToPoint(False)
    iterations = max_iterations
    checkers = [
        reg.CorrespondenceCheckerBasedOnEdgeLength(0.9),
        reg.CorrespondenceCheckerBasedOnDistance(dist),
    ]
    if mutual_filter:
        result = reg.registration_ransac_based_on_feature_matching(
            src_down, ref_down, src_fpfh, ref_fpfh, True, dist, estimation, 3, checkers,
            reg.RANSACConvergenceCriteria(max_iterations, confidence),
        )  # fmt: skip
    else:
        # Open3D's own matching (each source feature's nearest reference feature), done
        # here so that the cap's share of passing samples is taken on the same matches: the
        # same answer as its feature-matching RANSAC, in the same time
        corres = reg.correspondences_from_features(src_fpfh, ref_fpfh, False)

        timings["matching"] = time.perf_counter() - start
        start = time.perf_counter()
        if budget_s is not None:
            share = checker_pass_share(
                np.asarray(src_down.points), np.asarray(ref_down.points),
                np.asarray(corres), dist, seed=seed,
            )  # fmt: skip
            iterations = iteration_cap(len(corres), share, max_iterations, budget_s)
            if iterations < max_iterations:
                logger.info("RANSAC: %.3f of the samples pass the checkers, capped at %d "
                            "iterations (%.1f s budget)", share, iterations, budget_s)  # fmt: skip
            timings["ransac_share"] = time.perf_counter() - start
            start = time.perf_counter()
        o3d.utility.random.seed(int(seed))
        result = reg.registration_ransac_based_on_correspondence(
            src_down, ref_down, corres, dist, estimation, 3, checkers,
            reg.RANSACConvergenceCriteria(iterations, confidence),
        )  # fmt: skip
    timings["ransac"] = time.perf_counter() - start
    corr = np.asarray(result.correspondence_set, dtype=np.int64).reshape(-1, 2)
    src_corr = np.asarray(src_down.points)[corr[:, 0]]
    ref_corr = np.asarray(ref_down.points)[corr[:, 1]]
    transform = np.asarray(result.transformation).copy()
    fitness, rmse = float(result.fitness), float(result.inlier_rmse)
    if icp:
        start = time.perf_counter()
        refined = icp_refine(src_down, ref_down, transform, voxel_size)
        timings["icp"] = time.perf_counter() - start
        # Report the correspondences the final estimate rests on (ICP's, 1-voxel radius).
        transform = refined.transform
        src_corr, ref_corr = refined.src_corr_points, refined.ref_corr_points
        fitness, rmse = refined.fitness, refined.inlier_rmse
        corr = src_corr
    logger.info(
        "FPFH+RANSAC%s: fitness %.3f, %d inlier correspondences, %.2f s",
        "+ICP" if icp else "",
        fitness,
        len(corr),
        sum(timings.values()),
    )
    return ClassicalResult(transform, src_corr, ref_corr, fitness, rmse, timings, iterations)
