"""Object in scene: find a small cloud (an object, a template, a crop) inside a much larger one.

When one cloud spans a small part of the other (:data:`INSIDE_RATIO` to
:data:`MAX_INSIDE_RATIO` times smaller), the pair is not two overlapping scans of one scene
and neither network nor the scene-sized FPFH voxel applies: at the scene's 5 cm voxel a 0.2 m
object keeps a few dozen points. Here everything follows the **small** cloud, in the input's
own units (no unit reading is needed: the search is scale-free):

1. **Voxels**: the fine voxel is the small cloud's extent / :data:`FINE_DIVS` (at least its
   point spacing), the coarse ones its extent over each of :data:`COARSE_DIVS`, coarser where
   the large cloud would keep more than :data:`COARSE_MAX_POINTS` points at it.
2. **Places** (the large cloud searched at each coarse voxel): FPFH of both clouds, each small
   point's :data:`COARSE_MATCHES` nearest large features, and the places where matches of
   the most distinct small points gather
   (:func:`~pcreg.registration.inside_hypotheses.likely_places`); the two voxels' places
   taken in turn, up to eight of them.
3. **Poses** (the large cloud cropped around each place, :data:`CROP` small extents, at the
   fine voxel): FPFH on the crop only, a RANSAC that keeps all its hypotheses
   (:func:`~pcreg.registration.inside_hypotheses.ransac_hypotheses`), the best different
   hypotheses of each place refined together by point-to-plane ICP, each scored by the share of
   the small cloud's off-plane points that fit.
4. **Two answers**: the best fit, polished by Open3D's ICP, and where it does not fit whole
   (a template the scene sees in part), the best fit among the poses whose small cloud
   explains the scene's object points next to it
   (:func:`~pcreg.registration.inside_verdict.object_share`), the poses of the small cloud's
   rendered views at the first places among them
   (:func:`~pcreg.registration.inside_hypotheses.view_hypotheses`), polished and probed for a
   turn that fits as well.
5. **The rule** (:func:`~pcreg.registration.inside_verdict.inside_rule`) judges the answer as
   a whole or in part; its measurements and thresholds are in
   :mod:`pcreg.registration.inside_verdict`.

The search's settings were measured with ``python tools/inside_rule.py`` on generated rooms
with objects (:mod:`pcreg.data.synthetic.inside`, seeds below 1,000; the tests use others).
"""

from __future__ import annotations

import logging
import time

import numpy as np

from pcreg.registration.checks import MAX_INSIDE_RATIO, cloud_extent
from pcreg.registration.inside_hypotheses import (
    PLACES,
    feature_matches,
    likely_places,
    point_spacing,
    ransac_hypotheses,
    view_hypotheses,
    voxel_fpfh,
)
from pcreg.registration.inside_verdict import (
    MIN_FITNESS,
    MIN_OBJECT_SHARE,
    PART_PROBE_MARGIN,
    SUPPORT_BALL,
    InsideSearch,
    inside_rule,
    object_share,
    visible_fit,
)

__all__ = [
    "INSIDE_RATIO",
    "INSIDE_SMALL_RATIO",
    "MAX_INSIDE_RATIO",
    "InsideSearch",
    "find_inside",
    "inside_ratio",
    "inside_rule",
    "ransac_hypotheses",
    "register_inside",
]

logger = logging.getLogger(__name__)

#: from this extent ratio on a pair is registered as an object in a scene, and only so (the
#: scene path refuses extents more than 10x apart: different units)
INSIDE_RATIO = 10.0
#: from this ratio on, a pair the scene path does not register is searched as an object in a
#: scene too (a 0.5 m object in a 3 m scene keeps too few points at the 5 cm voxel)
INSIDE_FALLBACK_RATIO = 4.0
#: from this ratio on, a pair whose smaller cloud is too small for the network at the scene's
#: voxel is searched as an object in a scene (else the refusal stands: exit 2). Crops 0.5 m
#: around a point of a 3DMatch fragment (ratios 3.5-3.9, 5-7 superpoints at 0.4 m) were
#: refused as input; two equal clouds have ratio 1
INSIDE_SMALL_RATIO = 2.0
#: where no pose fits whole, the small cloud's rendered views are searched at this many of
#: the first places too (:func:`~pcreg.registration.inside_hypotheses.view_hypotheses`; 0: no)
VIEW_PLACES = 4
#: the fine voxel: the small cloud's extent over this
FINE_DIVS = 30.0
#: the coarse voxels: the small cloud's extent over each of these (at least two fine voxels),
#: and the most points the large cloud keeps at one (else that voxel grows: the places search
#: stays well under a second). The places of each are taken in turn (:func:`_interleaved`):
#: FPFH at the coarser one (5 voxels: 0.6 of the object) takes in a cluttered scene's desk
#: around a real object, which a crop of it lacks. Measured on real object scans composited
#: onto real RGB-D frames (``python tools/real_inside.py``, seeds 0 and 1): a place within half
#: an extent of the truth among the 8 first in 6 of 18 crops and 10 of 18 templates with the
#: extent / 8 alone, 12 and 11 with both. The second is at least two fine voxels (extent /
#: 15), and skipped where the first grew for the cap or is as fine already (the same places)
COARSE_DIVS = (8.0, 16.0)
COARSE_MAX_POINTS = 40_000
#: each small point's nearest large features at the coarse voxel
COARSE_MATCHES = 8
#: the crop around each place searched at the fine voxel (small extents)
CROP = 0.9
#: hypotheses of each place refined by ICP
REFINED_PER_PLACE = 4
#: surface variation above which a point is off a plane (:func:`structure`): 1 mm noise on
#: a plane gives about 0.002, a box's edge 0.05, a corner 0.1
STRUCTURE_VARIATION = 0.02
#: the poses are told apart by the share of the small cloud within this many fine voxels of
#: the large one: another object of the same size fits 80 % of a crop within 1.5 voxels
CLOSE = 0.5
#: two poses of the small cloud are different answers beyond this rotation (degrees) or
#: this displacement of its centre (small extents)
DIFFERENT_DEG = 15.0
DIFFERENT_SHIFT = 0.2


def _different(a: np.ndarray, b: np.ndarray, centre: np.ndarray, size: float) -> bool:
    """Whether poses ``a``, ``b`` put the small cloud (centre ``centre``, extent ``size``)
    in different places or turns (:data:`DIFFERENT_DEG`, :data:`DIFFERENT_SHIFT`)."""
    from pcreg.registration.verdict import pose_distance

    deg, shift = pose_distance(a, b, centre)
    return deg > DIFFERENT_DEG or shift > DIFFERENT_SHIFT * size


def find_inside(small: np.ndarray, large: np.ndarray, seed: int = 0) -> InsideSearch:
    """Search ``small (N, 3)`` inside ``large (M, 3)`` (float64, one unit, any frames); see
    the module doc. Seeded by ``seed`` (numpy's draws and Open3D's plane RANSAC; Open3D's
    multi-threaded steps may still differ in the last digits between runs)."""
    import open3d as o3d
    from scipy.spatial import cKDTree

    from pcreg.baselines.icp import downsample_with_normals
    from pcreg.registration.symmetry import point_to_plane, symmetry_probe
    from pcreg.registration.verdict import DIFFERENT_DIAGONAL
    from pcreg.registration.verify import MIN_INLIERS, verify

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    size = cloud_extent(small)
    fine = max(size / FINE_DIVS, point_spacing(small))
    rankings: list[list[np.ndarray]] = []
    coarse, capped = 0.0, False  # the first voxel as used (reported), and whether it grew
    for divs in COARSE_DIVS:
        voxel = max(size / divs, 2 * fine)
        if rankings and (capped or voxel > 0.9 * coarse):
            break  # as coarse as the first (two fine voxels, or the cap): the same places
        used, found = _places_at(small, large, voxel, size)
        capped = used > voxel  # a finer one would grow to about the same
        coarse = coarse or used
        rankings.append(found)
    places = _interleaved(rankings, size)
    centre = small.mean(axis=0)
    timings["places"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    small_f, small_ff = voxel_fpfh(small, fine, outward=True)
    small_fp = np.asarray(small_f.points)
    shape = small_fp[structure(small_fp, fine)]  # the points the poses are told apart by
    large_tree = cKDTree(large[:: max(1, len(large) // 400_000)])
    poses, crops = [], []
    place_crops = []  # per place searched: its crop's points, normals, features and tree
    for at in places:
        idx = large_tree.query_ball_point(at, CROP * size)
        if len(idx) < 10:
            continue
        crop_f, crop_ff = voxel_fpfh(large_tree.data[idx], fine, outward=True)
        crop_p = np.asarray(crop_f.points)
        corr = feature_matches(small_ff, crop_ff, 2)
        found, _ = ransac_hypotheses(small_fp, crop_p, corr, 1.5 * fine, rng)
        tree = cKDTree(crop_p)
        place_crops.append((crop_f, crop_ff, tree))
        if not len(found):
            continue
        keep = [found[0]]
        for pose in found[1:]:
            if len(keep) == REFINED_PER_PLACE:
                break
            if all(_different(pose, k, centre, size) for k in keep):
                keep.append(pose)
        refined = point_to_plane(np.array(keep), small_fp[:: max(1, len(small_fp) // 800)],
                                  tree, crop_p, np.asarray(crop_f.normals), 2 * fine)  # fmt: skip
        poses += list(refined)
        crops += [(crop_f, tree)] * len(refined)
    timings["poses"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if not poses:
        return InsideSearch(np.eye(4), None, 0.0, 0.0, 0.0, 1.0, 0, fine, coarse,
                            np.zeros((0, 3)), np.zeros((0, 3)), len(places), timings)  # fmt: skip
    fits = np.array([_fitness(shape, pose, tree, CLOSE * fine) for pose, (_, tree) in
                     zip(poses, crops, strict=True)])  # fmt: skip

    def near(pose: np.ndarray) -> np.ndarray:
        """The large cloud's points around the small one at ``pose``."""
        at = pose[:3, :3] @ centre + pose[:3, 3]
        return large_tree.data[large_tree.query_ball_point(at, (SUPPORT_BALL + 0.5) * size)]

    def share_at(pose: np.ndarray) -> tuple[float, int, float]:
        return object_share(small_fp, pose, near(pose), fine, size, seed)

    def settle(win: int, among: np.ndarray, part: bool) -> InsideSearch:
        """The candidate ``win`` polished by ICP and measured; its rival: the best fit of the
        candidates ``among`` (bool mask) at a different pose (``margin``: its fit over the
        win's), or as a ``part``, the symmetry probe's pose where that makes it ambiguous."""
        crop_f, _ = crops[win]
        at = poses[win][:3, :3] @ centre + poses[win][:3, 3]
        around = large_tree.query_ball_point(at, CROP * size)
        if not part and len(around) >= 10:
            # judged whole: ICP and the fit on the scene around the candidate, not around the
            # place it was found at, which may cut the object half an extent off and leave
            # out what fits. A part keeps its place's crop (its fit is only a floor; its
            # share and visible fit read the scene around it, :func:`near`). The candidates'
            # ranking and margin stay on their places' crops
            crop_f = downsample_with_normals(large_tree.data[around], fine)
        icp = o3d.pipelines.registration.registration_icp(
            small_f, crop_f, fine, poses[win],
            o3d.pipelines.registration.TransformationEstimationPointToPlane(),
            o3d.pipelines.registration.ICPConvergenceCriteria(1e-8, 1e-8, 50),
        )  # fmt: skip
        best = np.asarray(icp.transformation).copy()
        check = verify(small_fp, np.asarray(crop_f.points), best, fine, voxelised=True)
        rivals = [i for i in np.flatnonzero(among)
                  if _different(poses[i], poses[win], centre, size)]  # fmt: skip
        rival = max(rivals, key=lambda i: fits[i]) if rivals else None
        rival_pose = None if rival is None else poses[rival]
        share, count, through = share_at(best)
        margin = 0.0 if rival is None else float(fits[rival]) / max(float(fits[win]), 1e-12)
        probe_margin = probe_share = visible = 0.0
        if part:
            visible = visible_fit(small_f, best, cKDTree(near(best)), fine, size)
            # the probe's "different" as the search's: DIFFERENT_SHIFT of the small extent
            diagonal = DIFFERENT_SHIFT * size / DIFFERENT_DIAGONAL
            probe_margin, probe_pose = symmetry_probe(small_f, crop_f, best, fine, centre,
                                                      diagonal)  # fmt: skip
            if probe_pose is not None:
                probe_share = share_at(probe_pose)[0]
                if probe_margin >= PART_PROBE_MARGIN and probe_share >= MIN_OBJECT_SHARE:
                    rival_pose = probe_pose  # the rival the answer is refused for
        corr_set = np.asarray(icp.correspondence_set, np.int64).reshape(-1, 2)
        return InsideSearch(
            transform=best,
            rival=rival_pose,
            fitness=check.fitness,
            contrast=check.contrast,
            worst_contrast=check.worst_contrast,
            margin=margin,
            inliers=check.inliers,
            fine_voxel=fine,
            coarse_voxel=coarse,
            small_corr=small_fp[corr_set[:, 0]],
            large_corr=np.asarray(crop_f.points)[corr_set[:, 1]],
            places=len(places),
            timings=timings,
            candidates=list(zip(poses, fits, strict=True)),
            object_share=share,
            object_points=count,
            through=through,
            probe_margin=probe_margin,
            probe_share=probe_share,
            visible_fit=visible,
            part=part,
        )

    everyone = np.ones(len(poses), bool)
    found = settle(int(np.argmax(fits)), everyone, part=False)
    if not inside_rule(found) or found.fitness >= MIN_FITNESS or found.inliers < MIN_INLIERS:
        # registered whole, or refused for what a part answer would not change (it fits
        # whole but slides, or another place fits as well; nothing fits)
        timings["verify"] = time.perf_counter() - t0
        return found
    # not found whole: the best fit among the poses that explain the scene's object (module
    # doc), judged as an object the scene sees in part; the poses of the small cloud's
    # rendered views at the first places join them (a template the scene sees one side of)
    if VIEW_PLACES:
        t1 = time.perf_counter()
        searched = [(np.asarray(f.points), np.asarray(f.normals), ff, tree)
                    for f, ff, tree in place_crops[:VIEW_PLACES]]  # fmt: skip
        for pose, index, _ in view_hypotheses(small_fp, fine, size, searched, rng, CLOSE * fine):
            poses.append(pose)
            crops.append((place_crops[index][0], place_crops[index][2]))
            fits = np.append(fits, _fitness(shape, pose, place_crops[index][2], CLOSE * fine))
        timings["views"] = time.perf_counter() - t1
    shares = [share_at(pose) for pose in poses]
    explaining = np.array([c >= MIN_INLIERS and sh >= MIN_OBJECT_SHARE for sh, c, _ in shares])
    if not explaining.any():
        timings["verify"] = time.perf_counter() - t0 - timings.get("views", 0.0)
        found.part_tried = True
        return found
    win = int(np.argmax(np.where(explaining, fits, -1.0)))
    found = settle(win, explaining, part=True)
    timings["verify"] = time.perf_counter() - t0 - timings.get("views", 0.0)
    return found


def _places_at(
    small: np.ndarray, large: np.ndarray, coarse: float, size: float
) -> tuple[float, list[np.ndarray]]:
    """``(voxel, places)``: :func:`~pcreg.registration.inside_hypotheses.likely_places` of
    ``small`` (extent ``size``) in ``large`` at the voxel ``coarse``, coarser where the large
    cloud would keep more than :data:`COARSE_MAX_POINTS` points at it."""
    large_c, large_cf = voxel_fpfh(large, coarse, 30)
    if len(large_c.points) > COARSE_MAX_POINTS:  # a scene far larger than the object
        coarse *= float(np.sqrt(len(large_c.points) / COARSE_MAX_POINTS))
        large_c, large_cf = voxel_fpfh(large, coarse, 30)
    small_c, small_cf = voxel_fpfh(small, coarse, 30)
    corr = feature_matches(small_cf, large_cf, COARSE_MATCHES)
    return coarse, likely_places(np.asarray(small_c.points), np.asarray(large_c.points), corr, size)


def _interleaved(rankings: list[list[np.ndarray]], size: float) -> list[np.ndarray]:
    """The first :data:`~pcreg.registration.inside_hypotheses.PLACES` of ``rankings`` (each a
    list of positions ``(3,)``, best first) taken in turn, each more than half ``size`` from
    those taken before."""
    from itertools import zip_longest

    out: list[np.ndarray] = []
    for turn in zip_longest(*rankings):
        for at in turn:
            if at is not None and all(np.linalg.norm(at - o) > size / 2 for o in out):
                out.append(at)
    return out[:PLACES]


def structure(points: np.ndarray, voxel: float) -> np.ndarray:
    """``(N,) bool``: the points of ``points (N, 3)`` (voxelised at ``voxel``) off a plane:
    the surface variation (smallest eigenvalue of the covariance of the 16 nearest points over
    the sum) above :data:`STRUCTURE_VARIATION`. A crop of a scene is mostly floor or wall,
    which fits at any turn about its normal; the margin is measured on the rest. All points
    where fewer than :data:`MIN_INLIERS` are off a plane."""
    from scipy.spatial import cKDTree

    from pcreg.registration.verify import MIN_INLIERS

    k = min(16, len(points))
    _, idx = cKDTree(points).query(points, k=k)
    nb = points[idx] - points[idx].mean(axis=1, keepdims=True)
    eig = np.linalg.eigvalsh(np.einsum("nki,nkj->nij", nb, nb))
    variation = eig[:, 0] / np.maximum(eig.sum(axis=1), 1e-30)
    out = variation > STRUCTURE_VARIATION
    return out if out.sum() >= MIN_INLIERS else np.ones(len(points), bool)


def _fitness(points: np.ndarray, pose: np.ndarray, tree, radius: float) -> float:
    """Share of ``points (N, 3)`` moved by ``pose`` with a point of ``tree`` within ``radius``."""
    moved = points @ pose[:3, :3].T + pose[:3, 3]
    dist, _ = tree.query(moved, distance_upper_bound=radius)
    return float(np.isfinite(dist).mean())


def inside_ratio(src: np.ndarray, ref: np.ndarray) -> float:
    """The larger cloud's extent over the smaller's (:func:`cloud_extent`; inf when the
    smaller has none: the checks refuse it)."""
    small, large = sorted((cloud_extent(src), cloud_extent(ref)))
    return large / small if small > 0 else float("inf")


def register_inside(
    src: np.ndarray,
    ref: np.ndarray,
    names: tuple[str, str],
    origins: np.ndarray,
    start: float,
    units: str | None = None,
):
    """``method="auto"`` on a pair whose clouds differ in extent by :data:`INSIDE_RATIO` to
    :data:`MAX_INSIDE_RATIO`: the smaller one (either) searched inside the larger
    (:func:`find_inside`) and judged by :func:`inside_rule`. ``src``, ``ref`` are in the
    working frame (shifted by ``origins (2, 3)``); returns a
    :class:`~pcreg.registration.result.RegistrationResult` in the user's frame whose
    ``method_used`` is ``"object-in-scene"``, with a one-candidate verdict (its score:
    1 - the margin to the best different pose, 0 when the rule refuses it). ``units``: the
    unit the user named (default: the first reading of the larger cloud's extent).

    Raises:
        InputError: a degenerate cloud (:func:`~pcreg.registration.checks.check_cloud`)."""
    from pcreg.registration.checks import check_cloud
    from pcreg.registration.frames import to_user_frame
    from pcreg.registration.result import OUTDOOR_EXTENT_M, RegistrationResult
    from pcreg.registration.scale import METRES_PER_UNIT, readings
    from pcreg.registration.verdict import Candidate, Verdict
    from pcreg.registration.verify import Verification

    extents = (check_cloud(src, names[0]), check_cloud(ref, names[1]))
    swapped = extents[0] > extents[1]  # the source is the scene: search the reference in it
    small, large = (ref, src) if swapped else (src, ref)
    found = find_inside(small, large)
    transform, small_corr, large_corr = found.transform, found.small_corr, found.large_corr
    rival = found.rival
    if swapped:
        transform = np.linalg.inv(transform)
        rival = None if rival is None else np.linalg.inv(rival)
    src_corr, ref_corr = (large_corr, small_corr) if swapped else (small_corr, large_corr)
    reason = inside_rule(found)
    first = readings(max(extents))
    unit = units if units in METRES_PER_UNIT else (first[0].units if first else "metres")
    metres = METRES_PER_UNIT[unit]  # the setting and its inlier radius are in metres
    result = RegistrationResult(
        transform=transform,
        src_corr_points=src_corr,
        ref_corr_points=ref_corr,
        corr_scores=np.ones(len(src_corr)),
        method="fpfh-ransac",
        model="indoor",
        setting="outdoor" if max(extents) * metres > OUTDOOR_EXTENT_M else "indoor",
        icp=True,
        voxel_size=found.fine_voxel,
        confidence=float(np.clip(found.contrast, 0.0, 1.0)),
        fitness=found.fitness,
        method_used="object-in-scene",
        units=unit,
        scale=metres,  # no network scale: the input's unit to metres, for the inlier radius
        timings=dict(found.timings),
    )
    result.verification = Verification(
        found.inliers, max(int(found.inliers / max(found.fitness, 1e-12)), found.inliers),
        1.5 * found.fine_voxel, found.contrast, worst_contrast=found.worst_contrast,
    )  # fmt: skip
    to_user_frame(result, origins)
    centre = src.mean(axis=0) + origins[0]
    rival_user = None
    if rival is not None and reason.startswith("ambiguous"):
        rival_user = rival.copy()
        rival_user[:3, 3] += origins[1] - rival_user[:3, :3] @ origins[0]
    features = dict(found.features, inside_ratio=max(extents) / min(extents))
    score = 0.0 if reason else float(np.clip(1.0 - found.margin, 0.0, 1.0))
    cand = Candidate(result, features, score)
    result.verdict = Verdict(cand, not reason, reason, None, [cand], rival_user,
                             centre, max(extents))  # fmt: skip
    result.readings = [{"units": result.units, "object": False, "scale": result.scale,
                        "inside": True, "best_score": round(score, 4)}]  # fmt: skip
    result.timings["total"] = time.perf_counter() - start
    logger.info("object in scene (%s inside %s, %.1fx): %s", names[1 if swapped else 0],
                names[0 if swapped else 1], max(extents) / min(extents),
                reason or "registered")  # fmt: skip
    return result
