"""How well a fit locates the source (``pcreg.registration.symmetry``): the symmetry probe's
margin to a different pose that fits, and the fit constraint."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from pcreg.registration import symmetry as S
from pcreg.registration import verdict as V


def _surface(rng, n, box_only):
    """Points on a box's surface (symmetric), or the box with two bumps of different sizes on
    two faces (no symmetry); metres, about 1 m across."""
    pts = rng.uniform(-0.5, 0.5, (n, 3)) * [1.0, 0.7, 0.4]
    face = rng.integers(3, size=n)
    side = rng.choice([-1.0, 1.0], size=n)
    half = np.array([0.5, 0.35, 0.2])
    pts[np.arange(n), face] = side * half[face]
    if not box_only:
        for centre, radius in (([0.5, 0.2, 0.0], 0.25), ([-0.2, 0.35, 0.1], 0.12)):
            bump = rng.normal(size=(n // 3, 3))
            bump = bump / np.linalg.norm(bump, axis=1, keepdims=True) * radius + centre
            pts = np.vstack([pts, bump])
    return pts


@pytest.mark.parametrize(("box_only", "symmetric"), [(True, True), (False, False)])
def test_symmetry_probe_finds_the_other_pose_of_a_symmetric_scan(rng, box_only, symmetric):
    """A box fits as well turned 180 deg about its axes (margin near 1, the other pose
    returned); the box with two unequal bumps does not (margin well below 1)."""
    from pcreg.baselines.icp import downsample_with_normals

    pts = _surface(rng, 20000, box_only)
    voxel = 0.02
    src, ref = downsample_with_normals(pts, voxel), downsample_with_normals(pts, voxel)
    diagonal = float(np.linalg.norm(np.ptp(pts, axis=0)))
    margin, pose = S.symmetry_probe(src, ref, np.eye(4), voxel, pts.mean(axis=0), diagonal)
    if symmetric:
        assert margin > 0.9 and pose is not None
        deg, _ = V.pose_distance(pose, np.eye(4), pts.mean(axis=0))
        assert deg > 80  # a turn of the box, not the estimate again
    else:
        assert margin < 0.75, margin


def test_symmetry_probe_takes_pcreg_clouds_as_open3d_clouds(rng):
    """The pipeline's clouds (pcreg.geometry.clouds, no Open3D) give what Open3D clouds of the
    same points and normals give."""
    from pcreg.geometry.clouds import downsample_with_normals

    pts = _surface(rng, 20000, False)
    voxel = 0.02
    src, ref = downsample_with_normals(pts, voxel), downsample_with_normals(pts, voxel)
    turn = np.eye(4)
    turn[:3, :3] = Rotation.from_rotvec([0.0, 0.0, 0.05]).as_matrix()
    centre, diagonal = pts.mean(axis=0), float(np.linalg.norm(np.ptp(pts, axis=0)))
    ours = S.symmetry_probe(src, ref, turn, voxel, centre, diagonal)
    theirs = S.symmetry_probe(src.to_open3d(), ref.to_open3d(), turn, voxel, centre, diagonal)
    assert ours[0] == theirs[0] and ours[0] > 0
    np.testing.assert_array_equal(ours[1], theirs[1])


def _corner_view(rng, n=20000):
    """The three faces of the 1.0 x 0.7 x 0.4 m box one corner shows (+x, +y, +z): a partial
    view whose principal axes are not the box's."""
    pts = _surface(rng, n, True)
    half = np.array([0.5, 0.35, 0.2])
    return pts[(np.abs(pts - half) < 1e-9).any(axis=1)]


def test_symmetry_probe_turns_a_partial_box_view_about_its_faces(rng, monkeypatch):
    """A corner view of a box against the whole box fits as well turned 180 deg about a face
    normal (the opposite corner). Turned about the view's principal axes only, the probe
    misses that pose; about its faces' normals it finds it."""
    from pcreg.geometry.clouds import downsample_with_normals

    box, view = _surface(rng, 40000, True), _corner_view(rng)
    # the view in a frame of its own: the estimate ``truth`` takes it back onto the box
    truth = np.eye(4)
    truth[:3, :3] = Rotation.from_euler("xyz", [20, -35, 70], degrees=True).as_matrix()
    truth[:3, 3] = [0.3, -1.2, 2.0]
    view = (view - truth[:3, 3]) @ truth[:3, :3]
    voxel = 0.02
    src, ref = downsample_with_normals(view, voxel), downsample_with_normals(box, voxel)
    centre, diagonal = view.mean(axis=0), float(np.linalg.norm(np.ptp(box, axis=0)))
    monkeypatch.setattr(S, "PROBE_FACE_AXES", False)
    without, _ = S.symmetry_probe(src, ref, truth, voxel, centre, diagonal)
    monkeypatch.setattr(S, "PROBE_FACE_AXES", True)
    margin, pose = S.symmetry_probe(src, ref, truth, voxel, centre, diagonal)
    assert margin > 0.9 and without < 0.8, (margin, without)
    deg, _ = V.pose_distance(pose, truth, centre)
    assert deg == pytest.approx(180.0, abs=3.0)
    # the other pose is the box's own half turn about one of its axes, after the truth
    turn = pose @ np.linalg.inv(truth)
    assert np.allclose(np.abs(turn[:3, :3]), np.diag(np.abs(np.diag(turn[:3, :3]))), atol=0.05)
    assert np.allclose(turn[:3, 3], 0.0, atol=0.02)  # about the box's centre (the origin)


def test_fit_constraint_is_near_zero_where_the_fit_slides(rng):
    """Two walls meeting in a vertical corner leave the slide along the corner free; the
    same walls with a floor and a block on it hold every direction."""
    from pcreg.geometry.clouds import downsample_with_normals

    n = 15000
    wall_x = np.c_[np.zeros(n), rng.uniform(0, 2, n), rng.uniform(0, 2, n)]
    wall_y = np.c_[rng.uniform(0, 2, n), np.zeros(n), rng.uniform(0, 2, n)]
    floor = np.c_[rng.uniform(0, 2, n), rng.uniform(0, 2, n), np.zeros(n)]
    block = rng.uniform(0, 0.4, (n, 3))  # a 0.4 m cube's surface, at (1.0, 0.8) on the floor
    face = rng.integers(3, size=n)
    block[np.arange(n), face] = np.where(rng.random(n) < 0.5, 0.0, 0.4)
    block += [1.0, 0.8, 0.0]
    voxel = 0.04
    corner = np.vstack([wall_x, wall_y])
    room = np.vstack([wall_x, wall_y, floor, block])
    slide = S.fit_constraint(*(downsample_with_normals(corner, voxel),) * 2, np.eye(4), voxel)
    held = S.fit_constraint(*(downsample_with_normals(room, voxel),) * 2, np.eye(4), voxel)
    assert slide < 0.005 and held > 0.03, (slide, held)


def _blocks(rng, offsets):
    """An irregular 0.8 m cluster of boxes and a sphere (metres), laid at each of
    ``offsets``: a repeated structure where the offsets differ."""
    parts = []
    for lo, size in (([0, 0, 0], [0.8, 0.5, 0.05]), ([0.1, 0.1, 0.05], [0.2, 0.3, 0.4]),
                     ([0.5, 0.05, 0.05], [0.25, 0.2, 0.15])):  # fmt: skip
        p = rng.uniform(0, 1, (4000, 3)) * size
        face = rng.integers(3, size=len(p))
        p[np.arange(len(p)), face] = rng.choice([0.0, 1.0], len(p)) * np.asarray(size)[face]
        parts.append(p + lo)
    ball = rng.normal(size=(3000, 3))
    parts.append(ball / np.linalg.norm(ball, axis=1, keepdims=True) * 0.12 + [0.6, 0.35, 0.3])
    one = np.vstack(parts)
    return np.vstack([one + off for off in offsets])


@pytest.mark.parametrize(("copies", "found"), [(3, True), (1, False)])
def test_shift_probe_finds_another_copy_of_a_repeated_structure(rng, copies, found):
    """A cluster laid three times 1.2 m apart: the source (the middle copy) fits the first copy
    as well as its own (margin near 1, the other place returned, 1.2 m away, not turned);
    laid once, no other place fits nearly as well."""
    from pcreg.geometry.clouds import downsample_with_normals

    voxel = 0.02
    ref_pts = _blocks(rng, [[1.2 * k, 0.0, 0.0] for k in range(copies)])
    src_pts = _blocks(rng, [[1.2 * (copies // 2), 0.0, 0.0]])
    src, ref = downsample_with_normals(src_pts, voxel), downsample_with_normals(ref_pts, voxel)
    diagonal = float(np.linalg.norm(np.ptp(ref_pts, axis=0)))
    centre = src_pts.mean(axis=0)
    margin, pose = S.shift_probe(src, ref, np.eye(4), voxel, centre, diagonal)
    if found:
        assert margin > 0.95 and pose is not None, margin
        deg, away = V.pose_distance(pose, np.eye(4), centre)
        assert deg < 2 and away == pytest.approx(1.2, abs=0.05)
    else:
        assert margin < 0.75, margin  # well under V.SHIFT_MARGIN


def test_shift_probe_does_not_count_a_slide_as_another_place(rng):
    """A patch of a large floor slides anywhere on it: every shifted pose fits as well, but
    the fit holds all the way there, so it is the same surface, not another copy (margin 0)."""
    from pcreg.geometry.clouds import downsample_with_normals

    voxel = 0.05
    floor = np.column_stack([rng.uniform(0, 6, (30000, 2)), np.zeros(30000)])
    patch = floor[(floor[:, 0] < 2) & (floor[:, 1] < 2)]
    src, ref = downsample_with_normals(patch, voxel), downsample_with_normals(floor, voxel)
    margin, pose = S.shift_probe(src, ref, np.eye(4), voxel, patch.mean(axis=0), 8.5)
    assert margin == 0.0 and pose is None
    # what refuses it is the fit on the way: counted anyway, a shifted pose fits as well
    slid, _ = S.shift_probe(src, ref, np.eye(4), voxel, patch.mean(axis=0), 8.5, valley=np.inf)
    assert slid > 0.95, slid


def test_fit_detail_is_near_zero_on_a_bare_corner_and_counts_what_stands_in_it(rng):
    """A floor and two walls hold a fit firmly (the constraint is high) yet rest on nothing
    but planes: the detail is 0. A block standing in the corner is the share of the fitted
    points it holds; a fit of the block alone is all detail."""
    from pcreg.geometry.clouds import downsample_with_normals

    n = 15000
    wall_x = np.c_[np.zeros(n), rng.uniform(0, 2, n), rng.uniform(0, 2, n)]
    wall_y = np.c_[rng.uniform(0, 2, n), np.zeros(n), rng.uniform(0, 2, n)]
    floor = np.c_[rng.uniform(0, 2, n), rng.uniform(0, 2, n), np.zeros(n)]
    block = rng.uniform(0, 0.4, (n, 3))
    face = rng.integers(3, size=n)
    block[np.arange(n), face] = np.where(rng.random(n) < 0.5, 0.0, 0.4)
    block += [1.0, 0.8, 0.0]
    voxel = 0.04
    corner = downsample_with_normals(np.vstack([wall_x, wall_y, floor]), voxel)
    room = downsample_with_normals(np.vstack([wall_x, wall_y, floor, block]), voxel)
    bare = S.fit_detail(corner, corner, np.eye(4), voxel)
    assert bare < 0.002, bare
    assert S.fit_constraint(corner, corner, np.eye(4), voxel) > 0.03  # held, not sliding
    # the block's faces off the floor: its four sides and top, 0.4 m squares at 4 cm (about
    # 5 x 100 of the room's ~7,500 voxels), less the rows within a voxel of the floor
    furnished = S.fit_detail(room, room, np.eye(4), voxel)
    assert 0.04 < furnished < 0.08, furnished
    # a fit elsewhere only counts the fitted points: the moved corner meets nothing
    moved = np.eye(4)
    moved[:3, 3] = [5.0, 5.0, 5.0]
    assert S.fit_detail(corner, corner, moved, voxel) is None  # no measurement, no rule


def test_fit_clutter_sees_a_room_turned_on_its_shell(rng):
    """A closed 6 x 4 x 3 m box with three blocks along one side: at the truth the blocks fit
    as the room does (ratio 1); turned 180 deg about the room's vertical axis the shell still
    fits, the blocks land on empty floor (ratio near 0). Its share is the blocks' part of the
    cloud; a bare shell has no clutter (None: no measurement, no rule)."""
    from box_rooms import blocks, box_shell

    from pcreg.geometry.clouds import downsample_with_normals

    size = np.array([6.0, 4.0, 3.0])
    shell = box_shell(rng, size, 30_000)
    clutter = blocks(rng, (0.5, 2.5, 4.5), 0.8, 6000)
    voxel = 0.05
    room = downsample_with_normals(np.vstack([shell, clutter]), voxel)
    share, ratio = S.fit_clutter(room, room, np.eye(4), voxel)
    assert 0.03 < share < 0.12, share
    assert ratio == pytest.approx(1.0, abs=0.01)
    turned = np.eye(4)
    turned[:2, :2] = -np.eye(2)
    turned[:2, 3] = size[:2]  # 180 deg about the vertical axis through the room's centre
    share_turned, ratio_turned = S.fit_clutter(room, room, turned, voxel)
    assert share_turned == share
    assert ratio_turned < 0.2, ratio_turned
    assert S.fit_clutter(downsample_with_normals(shell, voxel), room, np.eye(4), voxel) is None
