"""Geometric verification: is an estimated transform a real, distinctive fit of the two clouds?

Every method ends in a transform, and every method can end in a wrong one: a network that never
saw such a scene, RANSAC on unrelated clouds, ICP in a local optimum. A wrong transform still
puts *some* source points near reference points (noise inside a room touches its walls, two
random boxes overlap everywhere), so the share of points that fit says little on its own. What
separates a real alignment is that it is a sharp peak: moved a few inlier radii away from it in
any direction, a real alignment of surfaces loses a large part of its fitting points, while a
chance fit loses about as many as it would anywhere else.

:func:`verify` measures that peak. At the estimate it counts the source points (voxelised) with a
reference point within ``1.5 voxel``; then it moves the source by :data:`STEP_RADII` inlier radii
along each axis, both ways, and rotates it about each axis, both ways, by the angle that moves
its points that far (root mean square): 12 perturbations. Its **contrast** is
``1 - median(count under perturbation) / count at the estimate``: about 0 for a chance fit
(noise, a random box), 0.43-0.51 for the correct estimates of the KITTI validation pairs (the
median ignores the perturbations along which a scene is degenerate, such as the translations
along a street).

A wrong pose can still be a sharp fit of a few planes: a room turned by 90 or 180 deg puts
its walls on the other room's walls. When a network made the estimate, its correspondences say
more: the share of their weight that the final estimate keeps within the protocol's inlier
radius (:func:`agreement`; 0.05-0.37 for the indoor network's correct estimates on generated
rooms, under 0.02 for ICP's wrong local optima and for randomly initialised networks).

These measurements, and the overlap the other way (:attr:`Verification.reverse_fitness`), the
residuals, the fit up close and the contrast along the least sensitive direction, are what
the verdict (:mod:`pcreg.registration.verdict`) scores; it decides ``registered`` over all the
estimates of a search. :attr:`Verification.reason` keeps the single-estimate thresholds
:data:`REGISTERED_CONTRAST` (0.35) and :data:`MIN_AGREEMENT` (0.03), measured earlier with
``python tools/calibrate_confidence.py --rooms 3``, for estimates judged on their own (a
result built without a search); they let a mirror pose of a symmetric room, and fragments
of two different generated rooms, pass (BENCHMARKS.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pcreg._text import apart

__all__ = [
    "MIN_AGREEMENT",
    "MIN_INLIERS",
    "REGISTERED_CONTRAST",
    "STEP_RADII",
    "Verification",
    "verify",
]

#: the perturbations' size, in inlier radii (1.5 voxel each): 4.5 voxels, 22 cm indoors
STEP_RADII = 3.0
#: contrast at or above which an estimate counts as registered (calibrated, see module doc)
REGISTERED_CONTRAST = 0.35
#: least share of the network's correspondence weight that the final estimate must keep within
#: the protocol's inlier radius (calibrated, see module doc)
MIN_AGREEMENT = 0.03
#: fewest fitting source points (voxelised) an estimate may rest on
MIN_INLIERS = 30
#: source points at most used for the counts (an even stride through the voxelised cloud)
MAX_QUERY_POINTS = 8000


@dataclass(frozen=True)
class Verification:
    """How an estimate fits: ``inliers`` of ``points`` voxelised source points have a reference
    point within ``radius`` metres; ``contrast`` (see module doc; 1 - median ratio, at most 1)."""

    inliers: int
    points: int
    radius: float
    contrast: float
    agreement: float | None = None
    #: share of the (voxelised) reference with a moved source point within ``radius``: the
    #: overlap seen from the other side (a part of a scan fits its whole in one direction only)
    reverse_fitness: float = 0.0
    #: median distance of the fitting source points to their reference neighbour, in radii
    #: (0-1): a surface laid on a surface sits near 0.3, a chance fit spreads towards 1
    residual: float = 1.0
    #: the 90th percentile of those distances, in radii
    residual_tail: float = 1.0
    #: share of the source within a third of ``radius`` (half a voxel): the fit up close
    fine_fitness: float = 0.0
    #: ``1 - max(count under perturbation) / count at the estimate``: the contrast along the
    #: direction the fit is least sensitive to (near 0 or below: a symmetry or a slide)
    worst_contrast: float = 0.0
    #: the best different pose's fit over this one's
    #: (:func:`~pcreg.registration.symmetry.symmetry_probe`; 0 when not probed)
    probe_margin: float = 0.0
    #: that pose ``(4, 4)``, in the user's frame and units once the result is
    probe_pose: np.ndarray | None = None
    #: how firmly the fit holds the source in its weakest direction
    #: (:func:`~pcreg.registration.symmetry.fit_constraint`; 0 when not measured)
    constraint: float = 0.0
    #: the best different *place*'s fit at the same orientation over this one's
    #: (:func:`~pcreg.registration.symmetry.shift_probe`: repeated structure; 0 when not
    #: probed)
    shift_margin: float = 0.0
    #: that pose ``(4, 4)``, in the user's frame and units once the result is
    shift_pose: np.ndarray | None = None
    #: share of the fitted source points off the three largest planes through them
    #: (:func:`~pcreg.registration.symmetry.fit_detail`; None when not measured)
    detail: float | None = None
    #: the share of the source off its room's shell and how that part fits over how all of
    #: it does (:func:`~pcreg.registration.symmetry.fit_clutter`; None when not measured)
    clutter: tuple[float, float] | None = None
    #: the share of the moved source in the free space the reference's sensor saw, the
    #: reference seen from its own origin (:func:`~pcreg.geometry.visibility.seen_free_space`;
    #: None when not measured)
    free_space: float | None = None

    @property
    def fitness(self) -> float:
        """Share of the (voxelised) source that fits at the estimate: the visible overlap."""
        return self.inliers / self.points if self.points else 0.0

    @property
    def registered(self) -> bool:
        return not self.reason

    @property
    def reason(self) -> str:
        """Why the estimate is not a registration, in words (``""`` when it is)."""
        if self.inliers < MIN_INLIERS:
            return (
                f"only {self.inliers} source points fit within {self.radius:.3g} m of the "
                f"reference at the estimate (at least {MIN_INLIERS} needed): no overlap found"
            )
        if self.agreement is not None and self.agreement < MIN_AGREEMENT:
            share, least = apart(self.agreement, MIN_AGREEMENT, 0, percent=True)
            return (
                f"the network's correspondences do not support the estimate (only {share} of "
                f"their weight agrees with it, at least {least} needed)"
            )
        if self.contrast < REGISTERED_CONTRAST:
            confidence, least = apart(self.contrast, REGISTERED_CONTRAST)
            return (
                f"the fit is not distinctive (confidence {confidence} < {least}): the clouds "
                "may be unrelated or not overlap"
            )
        return ""


def agreement(
    src_corr: np.ndarray,
    ref_corr: np.ndarray,
    scores: np.ndarray,
    transform: np.ndarray,
    radius: float,
) -> float:
    """Share of the correspondences' weight that ``transform (4, 4)`` maps within ``radius``
    metres: ``src_corr``, ``ref_corr`` ``(K, 3)``, ``scores (K,)`` non-negative (0 when there
    are none). With unit scores, the protocol's inlier ratio of the correspondences under
    the estimate."""
    scores = np.asarray(scores, np.float64).reshape(-1)
    total = float(scores.sum())
    if not len(scores) or total <= 0:
        return 0.0
    t = np.asarray(transform, np.float64)
    moved = np.asarray(src_corr, np.float64) @ t[:3, :3].T + t[:3, 3]
    near = np.linalg.norm(moved - np.asarray(ref_corr, np.float64), axis=1) < radius
    return float(scores[near].sum() / total)


def _voxelised(points: np.ndarray, voxel: float) -> np.ndarray:
    """``points (N, 3)`` voxelised at ``voxel`` metres: Open3D's voxel means, in cell order
    (:func:`pcreg.geometry.clouds.voxel_downsample`)."""
    from pcreg.geometry.clouds import voxel_downsample

    return voxel_downsample(points, voxel)


def _rotation_about(rotvec: np.ndarray) -> np.ndarray:
    """``(3, 3)`` float64 rotation by the rotation vector ``rotvec (3,)`` (axis times angle in
    radians; Rodrigues' formula, as ``scipy.spatial.transform.Rotation.from_rotvec`` to
    1e-15 without importing scipy.spatial)."""
    rotvec = np.asarray(rotvec, np.float64)
    angle = float(np.linalg.norm(rotvec))
    if angle == 0.0:
        return np.eye(3)
    x, y, z = rotvec / angle
    cross = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + np.sin(angle) * cross + (1.0 - np.cos(angle)) * (cross @ cross)


def perturbations(points: np.ndarray, step: float) -> np.ndarray:
    """``(12, 4, 4)``: translations by ``step`` metres along +-x, +-y, +-z, and rotations about
    the same axes through the centroid of ``points (N, 3)`` by the angle that moves them
    ``step`` metres (root mean square; at most 90 deg)."""
    centre = points.mean(axis=0)
    offsets = points - centre
    out = np.tile(np.eye(4), (12, 1, 1))
    for axis in range(3):
        # a turn by a about an axis moves a point 2 sin(a/2) times its distance to the axis
        lever = float(np.sqrt((np.delete(offsets, axis, axis=1) ** 2).sum(axis=1).mean()))
        angle = 2 * np.arcsin(min(step / max(2 * lever, 1e-12), np.sin(np.pi / 4)))
        for k, sign in enumerate((-1.0, 1.0)):
            i = 4 * axis + 2 * k
            out[i, axis, 3] = sign * step
            rot = _rotation_about(sign * angle * np.eye(3)[axis])
            out[i + 1, :3, :3] = rot
            out[i + 1, :3, 3] = centre - rot @ centre
    return out


def verify(
    src: np.ndarray,
    ref: np.ndarray,
    transform: np.ndarray,
    voxel: float,
    agreement: float | None = None,
    *,
    voxelised: bool = False,
) -> Verification:
    """Verify ``transform (4, 4)`` (``T_ref_src``) on ``src (N, 3)`` and ``ref (M, 3)``
    (metres, float64, the frame the transform was estimated in) at ``voxel`` metres (the
    method's voxel: 5 cm indoors, 0.3 m outdoors). ``agreement``: the network's
    correspondences' :func:`agreement` with it, when a network made them. ``voxelised``: the
    clouds are already voxelised at ``voxel`` (Open3D's voxel means, as
    :func:`pcreg.geometry.clouds.voxel_downsample` makes them; ICP's clouds, reused).
    Deterministic; the 13 placements are counted in one k-d tree query
    (:class:`pcreg.geometry.clouds.KdTree`) on :func:`pcreg.engine.threads.current_threads`:
    0.010 s on the 3DMatch demo pair and 0.029 s on the KITTI pair 94/95, voxelising
    included (0.016 and 0.040 s with Open3D's voxels and scipy's tree), one thread of the
    2-core VM. Above :data:`MAX_QUERY_POINTS` the source is an even stride through its voxels,
    which come in cell order (Open3D's came in its hash map's order, which followed the
    input's order and its platform's hash table): at the ground truth of the KITTI pairs
    94/95 and 198/199 the contrast moved from 0.4791 to 0.4794 and from 0.4953 to 0.4929
    with it (the 3DMatch pairs, under 8000 voxels, are unchanged)."""
    from pcreg.engine.threads import current_threads
    from pcreg.geometry.clouds import KdTree

    s, r = (src, ref) if voxelised else (_voxelised(src, voxel), _voxelised(ref, voxel))
    radius = 1.5 * voxel
    if len(s) == 0 or len(r) == 0:
        return Verification(0, len(s), radius, 0.0, agreement)
    full = s
    if len(s) > MAX_QUERY_POINTS:
        s = s[:: -(-len(s) // MAX_QUERY_POINTS)]
    tree = KdTree(r)
    transform = np.asarray(transform, np.float64)
    placements = np.concatenate(
        [transform[None], transform @ perturbations(s, STEP_RADII * radius)]
    )  # (13, 4, 4): the estimate, then the 12 perturbations
    # (13, N, 3): s R^T + t for each placement, as one batched GEMM (numpy's einsum of the
    # same product took 9 ms on a room's pair, this 1-2 ms)
    moved = s[None] @ placements[:, :3, :3].transpose(0, 2, 1) + placements[:, None, :3, 3]
    dist, _ = tree.query(
        moved.reshape(-1, 3), distance_upper_bound=radius, workers=current_threads()
    )
    dist = dist.reshape(len(placements), len(s))
    counts = np.isfinite(dist).sum(axis=1)
    inliers = int(counts[0])
    if inliers == 0:
        return Verification(0, len(s), radius, 0.0, agreement)
    contrast = 1.0 - float(np.median(counts[1:])) / inliers
    near = dist[0][np.isfinite(dist[0])] / radius
    return Verification(
        inliers, len(s), radius, contrast, agreement,
        reverse_fitness=_reverse_fitness(full, r, transform, radius),
        residual=float(np.median(near)),
        residual_tail=float(np.quantile(near, 0.9)),
        fine_fitness=float((near < 1 / 3).sum() / len(s)),
        worst_contrast=1.0 - float(counts[1:].max()) / inliers,
    )  # fmt: skip


def _reverse_fitness(
    src: np.ndarray, ref: np.ndarray, transform: np.ndarray, radius: float
) -> float:
    """Share of ``ref (M, 3)`` (at most :data:`MAX_QUERY_POINTS`, an even stride) with a
    point of ``src (N, 3)`` moved by ``transform`` within ``radius``."""
    from pcreg.engine.threads import current_threads
    from pcreg.geometry.clouds import KdTree

    if len(ref) > MAX_QUERY_POINTS:
        ref = ref[:: -(-len(ref) // MAX_QUERY_POINTS)]
    moved = src @ transform[:3, :3].T + transform[:3, 3]
    dist, _ = KdTree(moved).query(ref, distance_upper_bound=radius, workers=current_threads())
    return float(np.isfinite(dist).mean())
