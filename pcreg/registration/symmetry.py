"""How well a fit locates the source: the margin to the best *different* pose that fits
(:func:`symmetry_probe`, a symmetric scene's other pose), the margin to another *place* at the
same orientation (:func:`shift_probe`, a copy of a repeated structure) and how firmly the fitted
surfaces hold the source in their weakest direction (:func:`fit_constraint`, a slide) and what
the fit rests on besides a floor and walls (:func:`fit_detail`, a bare corner). They are
measurements of one estimate that the verdict (:mod:`pcreg.registration.verdict`) scores or
rules on; the probes' poses are what an ``ambiguous`` answer reports.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from pcreg.registration.verdict import different

__all__ = [
    "DETAIL_POINTS",
    "PROBE_FACE_AXES",
    "PROBE_ITERATIONS",
    "PROBE_POINTS",
    "PROBE_TURNS",
    "SHIFT_PATH",
    "SHIFT_STARTS",
    "SHIFT_STRENGTH",
    "SHIFT_VALLEY",
    "fit_constraint",
    "fit_detail",
    "point_to_plane",
    "shift_probe",
    "symmetry_probe",
]

#: the probe's turns of the source about its axes (degrees), and its ICP
PROBE_TURNS = (90.0, 180.0, 270.0)
PROBE_POINTS = 600
PROBE_ITERATIONS = 8
#: the shift probe's starts: the highest peaks of the translation correlation
SHIFT_STARTS = 6
#: where on the way from the estimate to a shifted pose the fit is measured, and the share of
#: the estimate's fit it must fall under somewhere there for the pose to be another *place*
#: (a copy) rather than the same place slid along a wall or a floor. Measured on 195 cases of
#: the verdict set's fit scenes (generated rooms, objects and streets, the default search,
#: every peak refined, the valley taken at the best shifted pose; a scratch version of this
#: probe): right room registrations had a shifted pose fitting up to 1.24x as well, and the
#: fit stayed at 0.84-1.20 of the estimate's all the way there (slides); between the copies
#: of the tiled crop of the 3DMatch demo reference it falls to 0.23
SHIFT_PATH = (0.25, 0.5, 0.75)
SHIFT_VALLEY = 0.7
#: a peak of the translation correlation is refined only from this share of the correlation
#: at the estimate (:func:`~pcreg.geometry.shift_peaks.translation_peaks`' strength): a place
#: that lays 95 % as much of the source as the estimate overlaps about as many coarse cells
#: (the tiled crop's copies: 0.99 and 1.01; a copy that holds half the source: 0.5). At the
#: truth of the real 3DMatch demo pair two peaks reach it (0.89, 0.82: slides along its
#: walls), four do not (0.42-0.52); refining all six cost 0.1 s there
#: (one thread, a loaded 2-core VM)
SHIFT_STRENGTH = 0.8


def symmetry_probe(
    src_down, ref_down, transform: np.ndarray, voxel: float, centre: np.ndarray, diagonal: float
) -> tuple[float, np.ndarray | None]:
    """How well the best *different* pose fits, over the estimate's fit: the margin to a
    symmetric alternative that the search may never have proposed.

    ``src_down``, ``ref_down``: clouds at ``voxel`` (the reference with normals; the
    pipeline's ICP clouds): :class:`pcreg.geometry.clouds.Cloud` or Open3D ``PointCloud``
    (anything with ``points``, ``normals`` and ``has_normals()``), ``transform (4, 4)`` the
    estimate, all in the working frame;
    ``centre``, ``diagonal``: the source's centre and the reference's size there. The source
    (an even stride of at most :data:`PROBE_POINTS` points) is turned by :data:`PROBE_TURNS`
    about each of its principal axes through its centroid and, with
    :data:`PROBE_FACE_AXES`, about its two most common normal directions and their cross
    product (:func:`_face_axes`: a box's faces) through the middle of the bounding box of
    both views (an object's symmetry axes pass through the object, not through the part of
    it one view shows), each before the estimate, and refined by point-to-plane ICP
    (:data:`PROBE_ITERATIONS` steps, correspondences within 2 voxels: Open3D's
    ``registration_icp`` step, run for the 18 starts at once on one k-d tree); each result
    that is a different pose (:func:`different`) is scored by its fitness (share of the
    source within 1.5 voxels). Returns the best such fitness over the estimate's (0: none
    different; about 1 or more: a symmetric scene where another pose fits as well) and that
    pose. Measured at the truth (``python tools/probe_margins.py``, 2026-11-27): the real
    3DMatch pairs 0<-6 and 0<-5 0.51 and 0.44 (0.40 and 0.39 with the principal axes only),
    KITTI 95<-94 and 199<-198 0.33 and 0.23 (unchanged); generated rooms 0.99-1.22 with the
    principal axes only (boxes);
    on generated symmetric objects (one box or cylinder) the margin at the symmetric pose the
    search returned rose from 0.37-0.65 to 0.59-1.02 with the face turns. 25-31 ms on the
    real pairs (12-16 ms with the principal axes only), one thread of the 2-core VM."""
    from pcreg.geometry.clouds import KdTree
    from pcreg.registration.verify import _rotation_about

    points = np.asarray(src_down.points)
    if len(points) < 10 or not ref_down.has_normals():
        return 0.0, None
    points = points[:: max(1, -(-len(points) // PROBE_POINTS))]
    ref_pts, ref_normals = np.asarray(ref_down.points), np.asarray(ref_down.normals)
    tree = KdTree(ref_pts)
    fitness = partial(_fitness, points=points, tree=tree, radius=1.5 * voxel)  # (K, 4, 4) -> (K,)

    base = float(fitness(transform[None])[0])
    if base <= 0:
        return 0.0, None
    mid = points.mean(axis=0)
    _, _, axes = np.linalg.svd(points - mid, full_matrices=False)
    turns = [(axis, mid) for axis in axes]  # (axis, a point on it), source frame
    normals = np.asarray(src_down.normals)
    normals = normals[:: max(1, -(-len(normals) // (8 * PROBE_POINTS)))]
    faces = _face_axes(normals) if PROBE_FACE_AXES and len(normals) else None
    if faces is not None:
        # an object's symmetry axes pass through the object, not through the part of it
        # one view shows: the middle of both views' bounding box, in the source's frame
        moved = points @ transform[:3, :3].T + transform[:3, 3]
        both = np.vstack([moved, ref_pts[:: max(1, len(ref_pts) // PROBE_POINTS)]])
        middle = (both.min(axis=0) + both.max(axis=0)) / 2
        middle = transform[:3, :3].T @ (middle - transform[:3, 3])
        turns += [(axis, middle) for axis in faces]
    starts = []
    for axis, at in turns:
        for deg in PROBE_TURNS:
            turn = np.eye(4)
            turn[:3, :3] = _rotation_about(np.radians(deg) * axis)
            turn[:3, 3] = at - turn[:3, :3] @ at
            starts.append(transform @ turn)
    poses = point_to_plane(np.array(starts), points, tree, ref_pts, ref_normals, 2 * voxel)
    fits = fitness(poses)
    best, pose = 0.0, None
    for fit, moved in zip(fits, poses, strict=True):
        if fit > best and different(moved, transform, centre, diagonal):
            best, pose = float(fit), moved.copy()
    return best / base, pose


def shift_probe(
    src_down,
    ref_down,
    transform: np.ndarray,
    voxel: float,
    centre: np.ndarray,
    diagonal: float,
    valley: float = SHIFT_VALLEY,
) -> tuple[float, np.ndarray | None]:
    """How well the best *different place* fits at the estimate's orientation, over the
    estimate's fit: the margin to another copy of a repeated structure (a row of shelves,
    tiles, windows), which the symmetry probe's turns never reach.

    Arguments as :func:`symmetry_probe`'s. The source at the estimate's orientation is
    correlated with the reference over all translations
    (:func:`pcreg.geometry.shift_peaks.translation_peaks`, cells of
    :func:`~pcreg.geometry.shift_peaks.shift_cell`); of the :data:`SHIFT_STARTS` highest peaks
    at least :data:`~pcreg.registration.verdict.DIFFERENT_DIAGONAL` of ``diagonal`` away,
    those of at least :data:`SHIFT_STRENGTH` of the estimate's correlation are refined by
    point-to-plane ICP (half the symmetry probe's steps pairing within 1.5 cells, half within
    2 voxels) and scored by their fitness (share of the source within 1.5 voxels). A pose
    counts only where it is another place at the same orientation (its centre moved more than
    that share of ``diagonal``, turned at most :data:`~pcreg.registration.verdict.
    DIFFERENT_DEG`: ICP may turn a start into a symmetric pose, which is the symmetry probe's
    to judge) reached across a drop in fit: somewhere on the straight way to it
    (:data:`SHIFT_PATH`, the estimate's orientation) the fit falls under ``valley`` (default
    :data:`SHIFT_VALLEY`) of the estimate's (``inf``: every shifted pose counts, slides too,
    as ``tools/shift_margins.py`` compares). Returns the best such pose's fitness over the
    estimate's (0: none) and that pose. 26 ms at the truth of the real 3DMatch demo pair, the
    symmetry probe 90 ms in the same run (one thread, a loaded 2-core VM)."""
    from pcreg.geometry.clouds import KdTree
    from pcreg.geometry.shift_peaks import shift_cell, translation_peaks
    from pcreg.registration.verdict import DIFFERENT_DEG, DIFFERENT_DIAGONAL, pose_distance

    all_points = np.asarray(src_down.points)
    if len(all_points) < 10 or not ref_down.has_normals() or not src_down.has_normals():
        return 0.0, None
    ref_pts, ref_normals = np.asarray(ref_down.points), np.asarray(ref_down.normals)
    rot, trans = transform[:3, :3], transform[:3, 3]
    moved = all_points @ rot.T + trans
    cell = shift_cell(moved, ref_pts, voxel)
    shifts, strength = translation_peaks(moved, np.asarray(src_down.normals) @ rot.T, ref_pts,
                                         ref_normals, cell, SHIFT_STARTS,
                                         DIFFERENT_DIAGONAL * diagonal)  # fmt: skip
    shifts = shifts[strength >= SHIFT_STRENGTH]
    if not len(shifts):
        return 0.0, None
    points = all_points[:: max(1, -(-len(all_points) // PROBE_POINTS))]
    tree = KdTree(ref_pts)
    fitness = partial(_fitness, points=points, tree=tree, radius=1.5 * voxel)  # (K, 4, 4) -> (K,)

    base = float(fitness(transform[None])[0])
    if base <= 0:
        return 0.0, None
    starts = np.repeat(transform[None], len(shifts), axis=0)
    starts[:, :3, 3] += shifts
    half = PROBE_ITERATIONS // 2
    poses = point_to_plane(starts, points, tree, ref_pts, ref_normals, max(1.5 * cell, 2 * voxel),
                           half)  # fmt: skip
    poses = point_to_plane(poses, points, tree, ref_pts, ref_normals, 2 * voxel, half)
    fits = fitness(poses)
    # the fit on the way there: the estimate's orientation at a quarter, half and three
    # quarters of the translation to each pose (a slide fits all along; a copy does not)
    stops = len(SHIFT_PATH)
    way = np.repeat(transform[None], stops * len(poses), axis=0)
    steps = np.tile(np.array(SHIFT_PATH), len(poses))[:, None]
    way[:, :3, 3] = (1 - steps) * trans + steps * np.repeat(poses[:, :3, 3], stops, axis=0)
    valleys = fitness(way).reshape(len(poses), stops).min(axis=1)
    best, pose = 0.0, None
    for fit, low, found in zip(fits, valleys, poses, strict=True):
        deg, away = pose_distance(found, transform, centre)
        # another place at the same orientation (a turned pose is the symmetry probe's)
        elsewhere = deg <= DIFFERENT_DEG and away > DIFFERENT_DIAGONAL * diagonal
        if fit > best and low < valley * base and elsewhere:
            best, pose = float(fit), found.copy()
    return best / base, pose


def fit_constraint(src_down, ref_down, transform: np.ndarray, voxel: float) -> float:
    """How firmly the fit holds the source in every direction: the smallest eigenvalue of
    ``J^T J / K`` over the ``K`` source points (an even stride of at most
    :data:`PROBE_POINTS`) within 1.5 ``voxel`` of the reference at ``transform``, with the
    point-to-plane rows ``J = [((p - c) x n) / L, n]`` (``n`` the reference normal, ``c`` and
    ``L`` the fitted points' centroid and RMS radius: a turn is weighed by how far it moves
    them). Unit-free, 0-1 (at most 1/3 for the translation block): near 0, the surfaces
    that fit leave a direction free (a wall and a floor slide along their corner, a cylinder
    turns about its axis), so the fit does not locate the source however many points it
    holds. Clouds as :func:`symmetry_probe` takes them; 0 with fewer than 10 fitted points.
    Measured on generated room fragments: 0.035-0.08 at the truth, 0.008-0.014 for a part
    of a scan laid on a wall corner it does not belong to."""
    fitted = _fitted(src_down, ref_down, transform, voxel, PROBE_POINTS)
    if fitted is None:
        return 0.0
    p, n = fitted
    lever = p - p.mean(axis=0)
    radius = max(float(np.sqrt((lever**2).sum(axis=1).mean())), 1e-12)
    jac = np.hstack([np.cross(lever, n) / radius, n])
    return float(max(np.linalg.eigvalsh(jac.T @ jac / len(p))[0], 0.0))


def fit_detail(src_down, ref_down, transform: np.ndarray, voxel: float) -> float | None:
    """What the fit rests on besides three planes: the share of the source points within 1.5
    ``voxel`` of the reference at ``transform`` (an even stride of at most
    :data:`DETAIL_POINTS`) that lie farther than ``voxel`` from the three largest planes
    through them (:func:`pcreg.geometry.planes.off_plane_share`, the reference's normals).
    Near 0: the clouds meet on a floor and walls only, which any room's corner fits as well.
    Clouds as :func:`symmetry_probe` takes them; None with fewer than 10 fitted points or
    no reference normals (no measurement). Measured at 5 cm: 0.23-0.29 at the truth of the
    real 3DMatch and TUM pairs of ``../shared/data``; on generated room fragments 0.000-0.005
    for 16 of 19 wrong registrations (another room's corner, a mirror, a part of the scan
    that does not overlap), and under 0.01 for 13 of 111 right ones too (their overlap is a
    bare corner)."""
    from pcreg.geometry.planes import off_plane_share

    fitted = _fitted(src_down, ref_down, transform, voxel, DETAIL_POINTS)
    return None if fitted is None else off_plane_share(*fitted, voxel)


def fit_clutter(
    src_down, ref_down, transform: np.ndarray, voxel: float
) -> tuple[float, float] | None:
    """Whether the fit rests on the room's shell: ``(share, ratio)``. ``share``: the share of
    the source (an even stride of at most :data:`DETAIL_POINTS`) farther than ``voxel``
    from the :data:`SHELL_PLANES` largest planes through it (its own normals): furniture
    and other clutter, off the floor, the ceiling and four walls. ``ratio``: the share of
    those points within 1.5 ``voxel`` of the reference at ``transform`` over the share of
    all (the fitness). Near 1: the clutter fits as the room does; near 0: the fit rests on
    the shell, which another box-shaped room, or this one turned 180 deg, fits as well.
    None with fewer than 10 source points, no source normals, no clutter or no fit.

    Measured at 5 cm on two terrestrial-scanner stations in generated rooms
    (:func:`pcreg.data.synthetic.stations.station_pair`, seeds 4,100-4,129 at x1 and x1.5, the
    default search's registered answers): right ones 0.40-0.99, wrong ones (another room; this
    one turned 90-180 deg) 0.02-0.48. The 3DMatch demo pair at its truth: 1.0 (share 0.10)."""
    from pcreg.geometry.clouds import KdTree
    from pcreg.geometry.planes import off_planes

    points = np.asarray(src_down.points)
    if len(points) < 10 or not src_down.has_normals():
        return None
    stride = max(1, -(-len(points) // DETAIL_POINTS))
    points, normals = points[::stride], np.asarray(src_down.normals)[::stride]
    clutter = off_planes(points, normals, voxel, SHELL_PLANES)
    if clutter is None or not clutter.any():
        return None
    moved = points @ transform[:3, :3].T + transform[:3, 3]
    dist, _ = KdTree(np.asarray(ref_down.points)).query(moved, distance_upper_bound=1.5 * voxel)
    fits = np.isfinite(dist)
    if not fits.any():
        return None
    return float(clutter.mean()), float(fits[clutter].mean() / fits.mean())


#: the planes of a room's shell (:func:`fit_clutter`): a floor, a ceiling and four walls
SHELL_PLANES = 6


def _fitted(
    src_down, ref_down, transform: np.ndarray, voxel: float, most: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """The source points (an even stride of at most ``most``) within 1.5 ``voxel`` of the
    reference at ``transform``, moved there, and their reference neighbours' normals:
    ``(K, 3)`` each; None with fewer than 10 or no reference normals."""
    from pcreg.geometry.clouds import KdTree

    points = np.asarray(src_down.points)
    if len(points) < 10 or not ref_down.has_normals():
        return None
    points = points[:: max(1, -(-len(points) // most))]
    ref_pts, ref_normals = np.asarray(ref_down.points), np.asarray(ref_down.normals)
    moved = points @ transform[:3, :3].T + transform[:3, 3]
    dist, idx = KdTree(ref_pts).query(moved, distance_upper_bound=1.5 * voxel)
    near = np.isfinite(dist)
    if near.sum() < 10:
        return None
    return moved[near], ref_normals[idx[near]]


#: the source points :func:`fit_detail` measures at most (an even stride)
DETAIL_POINTS = 4000


#: also turn the source about the normals of its two most common plane orientations (a box's
#: faces: a partial view's principal axes are not its symmetry axes)
PROBE_FACE_AXES = True


def _face_axes(normals: np.ndarray) -> np.ndarray | None:
    """``(3, 3)``: the source's two most common normal directions (sign-free, within 10 deg,
    the second roughly orthogonal to the first) and their cross product
    (:func:`pcreg.geometry.manhattan.manhattan_axes`, 100 candidates, seed 0); None for
    fewer than 10 finite ``normals (V, 3)``."""
    from pcreg.geometry.manhattan import manhattan_axes

    normals = normals[np.isfinite(normals).all(axis=1)]
    if len(normals) < 10:
        return None
    return manhattan_axes(normals, 10.0, np.random.default_rng(0), 100)


def _fitness(poses: np.ndarray, points: np.ndarray, tree, radius: float) -> np.ndarray:
    """``(K,)``: the share of ``points (N, 3)`` within ``radius`` of the reference (its k-d
    ``tree``) under each of ``poses (K, 4, 4)``: the probes' fitness."""
    moved = points[None] @ poses[:, :3, :3].transpose(0, 2, 1) + poses[:, None, :3, 3]
    dist, _ = tree.query(moved.reshape(-1, 3), distance_upper_bound=radius)
    return np.isfinite(dist).reshape(len(poses), -1).mean(axis=1)


def point_to_plane(
    poses, points, tree, ref_pts, ref_normals, max_distance, iterations: int = PROBE_ITERATIONS
) -> np.ndarray:
    """``poses (K, 4, 4)`` refined by ``iterations`` (:data:`PROBE_ITERATIONS`) Gauss-Newton
    steps of point-to-plane ICP of ``points (N, 3)`` onto the reference (its k-d ``tree``: a
    :class:`pcreg.geometry.clouds.KdTree` or scipy ``cKDTree``; points and normals), pairs
    within ``max_distance``, all K at once."""
    poses = poses.copy()
    k, n = len(poses), len(points)
    eye = np.eye(3)
    for _ in range(iterations):
        moved = points[None] @ poses[:, :3, :3].transpose(0, 2, 1) + poses[:, None, :3, 3]
        dist, idx = tree.query(moved.reshape(-1, 3), distance_upper_bound=max_distance)
        near = np.isfinite(dist).reshape(k, n, 1)
        idx = np.where(np.isfinite(dist), idx, 0).reshape(k, n)
        normal = ref_normals[idx] * near
        residual = ((moved - ref_pts[idx]) * normal).sum(-1)  # (K, N), 0 where unpaired
        px, py, pz = moved[..., 0], moved[..., 1], moved[..., 2]
        nx, ny, nz = normal[..., 0], normal[..., 1], normal[..., 2]
        jac = np.stack([py * nz - pz * ny, pz * nx - px * nz, px * ny - py * nx, nx, ny, nz], -1)
        lhs = np.einsum("kni,knj->kij", jac, jac) + 1e-9 * np.eye(6)
        rhs = -np.einsum("kni,kn->ki", jac, residual)
        step = np.linalg.solve(lhs, rhs[..., None])[..., 0]  # (K, 6): rotation, translation
        # Rodrigues: the rotation by each step's rotation vector
        angle = np.linalg.norm(step[:, :3], axis=1)
        axis = step[:, :3] / np.maximum(angle, 1e-12)[:, None]
        cross = np.zeros((k, 3, 3))
        cross[:, 0, 1], cross[:, 0, 2], cross[:, 1, 2] = -axis[:, 2], axis[:, 1], -axis[:, 0]
        cross -= cross.transpose(0, 2, 1)
        sin, cos = np.sin(angle)[:, None, None], np.cos(angle)[:, None, None]
        update = np.tile(np.eye(4), (k, 1, 1))
        update[:, :3, :3] = eye + sin * cross + (1 - cos) * (cross @ cross)
        update[:, :3, 3] = step[:, 3:]
        poses = update @ poses
    return poses
