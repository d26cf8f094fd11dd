"""Object in scene: the search's features and hypotheses for a small cloud in a large one
(:mod:`pcreg.registration.inside`): FPFH at a voxel (:func:`voxel_fpfh`), nearest-feature
matches, the places in the large cloud where the small one's matches gather
(:func:`likely_places`) and a RANSAC over correspondences that keeps every hypothesis
(:func:`ransac_hypotheses`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pcreg.runtime.lgr import weighted_procrustes

__all__ = [
    "MAX_HYPOTHESES",
    "PLACES",
    "SAMPLES",
    "feature_matches",
    "likely_places",
    "point_spacing",
    "ransac_hypotheses",
    "view_directions",
    "view_hypotheses",
    "voxel_fpfh",
]

#: distinct places searched at the fine voxel
PLACES = 8
#: RANSAC: triplets drawn, and hypotheses kept for support counting, per place. A whole-object
#: template against the part of it a scan sees has 2-4 % right fine-voxel matches (before the fine
#: normals were turned outward, :func:`voxel_fpfh`: about 100 triplets passed the edge test and
#: none was near its truth on seeds 3, 7, 8; with them the search's pose is right on 17 of seeds
#: 0-19, and 120,000 triplets found no more and registered one wrong). Measured and not kept, before
#: the outward normals: 300,000 triplets (some within 15 deg of the truth, ranked 18-180th by
#: support) with half of 8 refined hypotheses per place ranked by the fit of a 300-point probe put
#: the right template pose among the refined ones in 16 of 20 cases (11 of 19 with these settings,
#: seeds 0-19), but the win was right in 9 of 20 test cases against 10 of 20 with these settings, at
#: about 0.5 s more per pair, and another room's crop then fit up to 90 % (seeds 0-19) and 94 %
#: (test seeds)
SAMPLES = 40_000
MAX_HYPOTHESES = 4000


def point_spacing(points: np.ndarray) -> float:
    """Median distance to the nearest other point, of an even stride of 2,000 of ``points``."""
    from scipy.spatial import cKDTree

    sample = points[:: max(1, len(points) // 2000)]
    dist, _ = cKDTree(points).query(sample, k=2)
    return float(np.median(dist[:, 1]))


def voxel_fpfh(points: np.ndarray, voxel: float, max_nn: int = 50, outward: bool = False):
    """``(cloud, features (N, 33))``: ``points`` voxelised at ``voxel`` with normals, and FPFH
    at 5 voxels. ``outward``: every normal turned away from the points' centroid first.

    FPFH is not invariant to a normal's sign, and an estimated normal's sign follows the
    cloud's frame, so a template and the scene's view of it, in two frames, disagree on about
    half their signs. Turned away from the centre of the object (the template's centroid, the
    crop's centre: both near the object), the two agree on the object's outside. Measured on
    generated templates (``tools/inside_rule.py``, seeds 0-9): the search's pose right in 9
    of 10 with this, 6 of 10 without."""
    import open3d as o3d

    from pcreg.baselines.icp import downsample_with_normals

    down = downsample_with_normals(points, voxel)
    if outward:
        pts, normals = np.asarray(down.points), np.asarray(down.normals)
        inward = np.einsum("ij,ij->i", pts - pts.mean(axis=0), normals) < 0
        down.normals = o3d.utility.Vector3dVector(np.where(inward[:, None], -normals, normals))
    fpfh = o3d.pipelines.registration.compute_fpfh_feature(
        down, o3d.geometry.KDTreeSearchParamHybrid(radius=5 * voxel, max_nn=max_nn)
    )
    return down, np.asarray(fpfh.data, np.float32).T


def feature_matches(small_f: np.ndarray, large_f: np.ndarray, k: int) -> np.ndarray:
    """``(K, 2)`` correspondences: each small point with its ``k`` nearest large features."""
    from scipy.spatial import cKDTree

    k = min(k, len(large_f))
    _, idx = cKDTree(large_f).query(small_f, k=k)
    idx = np.asarray(idx).reshape(len(small_f), k)
    return np.stack([np.repeat(np.arange(len(small_f)), k), idx.ravel()], 1)


def ransac_hypotheses(
    src: np.ndarray,
    ref: np.ndarray,
    corr: np.ndarray,
    radius: float,
    rng: np.random.Generator,
    *,
    reach: float | None = None,
    samples: int = SAMPLES,
) -> tuple[np.ndarray, np.ndarray]:
    """RANSAC over correspondences that keeps every hypothesis: ``(poses (H, 4, 4), support
    (H,))``, best-supported first.

    ``src (N, 3)``, ``ref (M, 3)``, ``corr (K, 2)`` index pairs; ``radius``: a correspondence
    supports a pose that maps it within this. ``samples`` triplets are drawn (their second and
    third correspondence among those whose reference point lies within ``reach`` of the
    first's: the small cloud is local, the large one is not), kept where their three edges
    agree within 10 % and are longer than 2 radii, solved by Kabsch (at most
    :data:`MAX_HYPOTHESES`) and counted."""
    from scipy.spatial import cKDTree

    if len(corr) < 3:
        return np.zeros((0, 4, 4)), np.zeros(0)
    p_all, q_all = src[corr[:, 0]], ref[corr[:, 1]]
    first = rng.integers(0, len(corr), samples)
    if reach is None:
        rest = rng.integers(0, len(corr), (samples, 2))
    else:
        near = cKDTree(q_all).query_ball_point(q_all, reach)
        sizes = np.array([len(n) for n in near])
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        flat = np.concatenate(near).astype(np.int64)
        pick = (rng.random((samples, 2)) * sizes[first, None]).astype(np.int64)
        rest = flat[offsets[first, None] + pick]
    idx = np.concatenate([first[:, None], rest], 1)
    for a, b in ((0, 1), (1, 2), (2, 0)):  # each edge filters the triplets left, cheaply
        dp = np.sqrt(((p_all[idx[:, a]] - p_all[idx[:, b]]) ** 2).sum(1))
        dq = np.sqrt(((q_all[idx[:, a]] - q_all[idx[:, b]]) ** 2).sum(1))
        idx = idx[(np.minimum(dp, dq) > 0.9 * np.maximum(dp, dq)) & (dp > 2 * radius)]
    p, q = p_all[idx[:MAX_HYPOTHESES]], q_all[idx[:MAX_HYPOTHESES]]  # (H, 3, 3)
    if not len(p):
        return np.zeros((0, 4, 4)), np.zeros(0)
    poses = weighted_procrustes(p, q)
    support = np.empty(len(poses))
    for start in range(0, len(poses), 256):  # (256, K, 3) at a time
        chunk = poses[start : start + 256]
        moved = p_all[None] @ chunk[:, :3, :3].transpose(0, 2, 1) + chunk[:, None, :3, 3]
        near_mask = ((moved - q_all[None]) ** 2).sum(-1) < radius**2
        support[start : start + 256] = near_mask.sum(1)
    order = np.argsort(-support, kind="stable")
    return poses[order], support[order]


def likely_places(
    small: np.ndarray, large: np.ndarray, corr: np.ndarray, size: float
) -> list[np.ndarray]:
    """Up to :data:`PLACES` positions ``(3,)`` in the large cloud where the small one may lie:
    where the most *distinct* small points have a feature match within half the small
    cloud's extent (``corr (K, 2)`` indexes ``small (N, 3)`` and ``large (M, 3)``), each peak
    more than half that extent from the others. Measured (``tools/inside_rule.py``, seeds
    0-5): the true place among the first 8 peaks in 10 of the 10 cases where the object is
    seen, first in 6; a RANSAC over the same matches ranked it first in 3 and found none in 4
    (too few correct matches to draw three of them at the coarse voxel)."""
    from scipy.spatial import cKDTree

    at = large[corr[:, 1]]
    near = cKDTree(at).query_ball_point(at, size / 2)
    votes = np.array([len(np.unique(corr[n, 0])) for n in near])
    out: list[np.ndarray] = []
    for i in np.argsort(-votes, kind="stable"):
        if all(np.linalg.norm(at[i] - o) > size / 2 for o in out):
            out.append(at[i])
            if len(out) == PLACES:
                break
    return out


#: the small cloud's rendered views (:func:`view_hypotheses`): how many directions, RANSAC's
#: triplets per view and place, the hypotheses of each refined, and how many of the best
#: answers (by the view's own fit) are kept
VIEWS = 8
VIEW_SAMPLES = 10_000
VIEW_REFINED = 2
VIEW_KEEP = 4


def view_directions(count: int) -> np.ndarray:
    """``(count, 3)`` unit vectors spread evenly over the sphere (a Fibonacci lattice)."""
    i = np.arange(count) + 0.5
    polar = np.arccos(1.0 - 2.0 * i / count)
    azimuth = np.pi * (1.0 + 5.0**0.5) * i
    return np.stack([np.cos(azimuth) * np.sin(polar), np.sin(azimuth) * np.sin(polar),
                     np.cos(polar)], 1)  # fmt: skip


def view_hypotheses(
    small: np.ndarray,
    voxel: float,
    size: float,
    crops: list[tuple[np.ndarray, np.ndarray, np.ndarray, Any]],
    rng: np.random.Generator,
    close: float,
) -> list[tuple[np.ndarray, int, float]]:
    """Poses of ``small (N, 3)`` (voxelised at ``voxel``, extent ``size``) found through its
    rendered views: ``[(pose (4, 4), crop index, the view's fit)]``, at most
    :data:`VIEW_KEEP`, the best fit first.

    A whole-object template against a scan that sees one side of it: the template's FPFH
    near its outline takes in its far side, which the scan lacks, and 2-4 % of its matches at
    the right place are right, too few for RANSAC. Each of :data:`VIEWS` views of the template
    (the points Open3D's hidden point removal keeps from 3 extents away, Katz, Tal and Basri
    2007) looks like a scan of it; its own FPFH is matched to each place's crop and RANSAC'd
    (:data:`VIEW_SAMPLES` triplets), the :data:`VIEW_REFINED` best hypotheses refined by
    point-to-plane ICP, and each scored by the share of the view's points within ``close``
    of the crop. ``crops``: per place, ``(crop points (M, 3), their normals (M, 3), their
    features (M, 33), a cKDTree of the points)``.

    Measured on the Stanford bunny and dragon range views merged into whole templates, each
    set upright on the largest plane of a TUM RGB-D frame with one of its range views
    (``python tools/real_inside.py``): at the object's place, the whole template's RANSAC
    found its pose in 3 of 10 cases; one of 8 views found it (within 7 deg) in 9 of 10, and in
    each of those the best-fitting view was a right one (fit 0.35-0.90 against at most 0.38
    for wrong ones)."""
    import open3d as o3d

    from pcreg.registration.symmetry import point_to_plane

    centre = small.mean(axis=0)
    found: list[tuple[np.ndarray, int, float]] = []
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(small))
    for direction in view_directions(VIEWS):
        _, seen = cloud.hidden_point_removal(centre + 3.0 * size * direction, 300.0 * size)
        view = small[np.asarray(seen, np.int64)]
        if len(view) < 50:
            continue
        view_f, view_ff = voxel_fpfh(view, voxel, outward=True)
        view_p = np.asarray(view_f.points)
        stride = view_p[:: max(1, len(view_p) // 800)]
        for index, (crop_p, crop_n, crop_ff, tree) in enumerate(crops):
            corr = feature_matches(view_ff, crop_ff, 2)
            poses, _ = ransac_hypotheses(view_p, crop_p, corr, 1.5 * voxel, rng,
                                         samples=VIEW_SAMPLES)  # fmt: skip
            if not len(poses):
                continue
            refined = point_to_plane(poses[:VIEW_REFINED], stride, tree, crop_p, crop_n,
                                     2 * voxel)  # fmt: skip
            for pose in refined:
                moved = view_p @ pose[:3, :3].T + pose[:3, 3]
                dist, _ = tree.query(moved, distance_upper_bound=close)
                found.append((pose, index, float(np.isfinite(dist).mean())))
    found.sort(key=lambda f: -f[2])
    return found[:VIEW_KEEP]
