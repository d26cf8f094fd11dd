"""Free space seen from a scan's own origin (:mod:`pcreg.geometry.visibility`)."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg.geometry.visibility import (
    MARGIN_SHARE,
    MARGIN_VOXELS,
    SENSOR_HIDDEN,
    RangeImage,
    eye_near,
    free_space_share,
    hidden_share,
    seen_free_space,
    sensor_view,
)


def _room(rng: np.random.Generator, n: int = 20_000) -> np.ndarray:
    """Points on the six faces of a 6 x 4 x 3 m box around the origin, and a 1 m cube
    standing 2 m in front of the origin along +x (seen from the origin, it hides part of the
    far wall)."""
    lo, hi = np.array([-3.0, -2.0, -1.5]), np.array([3.0, 2.0, 1.5])
    pts = rng.uniform(lo, hi, size=(n, 3))
    face = rng.integers(0, 6, size=n)
    axis, side = face // 2, face % 2
    pts[np.arange(n), axis] = np.where(side == 0, lo[axis], hi[axis])
    cube = rng.uniform([1.5, -0.5, -1.5], [2.5, 0.5, -0.5], size=(n // 10, 3))
    cube[:, 0] = 1.5  # its face towards the origin
    return np.concatenate([pts, cube])


def test_range_image_keeps_the_nearest_return_of_each_neighbourhood():
    """The cube's face at 1.5 m hides the wall at 3 m: the image's range in that direction
    is the face's, and a cell next to the face (its neighbourhood holds the face) too."""
    image = RangeImage(_room(np.random.default_rng(0)), np.zeros(3))
    nearest, r = image.lookup(np.array([[3.0, 0.0, -1.4], [3.0, 0.0, 1.2]]))
    assert nearest[0] == pytest.approx(1.5 * np.hypot(1.0, 1.4 / 3), rel=0.03)  # the face
    assert nearest[1] == pytest.approx(np.hypot(3.0, 1.2), rel=0.03)  # above the cube: the wall
    assert r == pytest.approx([np.hypot(3.0, 1.4), np.hypot(3.0, 1.2)])
    empty = RangeImage(np.array([[1.0, 0.0, 0.0]]), np.zeros(3))
    assert np.isinf(empty.lookup(np.array([[-1.0, 0.0, 0.0]]))[0][0])  # never seen


def test_free_space_share_counts_points_in_front_of_the_nearest_return():
    """Points inside the room (in front of its walls) lie in free space; points on the walls,
    behind them, or in front by less than the margin do not; unseen directions are not
    judged, and under ``min_judged`` nothing is."""
    rng = np.random.default_rng(1)
    room = _room(rng)
    image = RangeImage(room, np.zeros(3))
    voxel = 0.05
    inside = rng.uniform([-2.0, -1.5, -1.0], [-1.0, 1.5, 1.0], size=(400, 3))  # 1-2 m free
    share, judged = free_space_share(inside, image, voxel)
    assert judged == 400 and share == pytest.approx(1.0)
    on_walls = room[rng.choice(len(room), 400, replace=False)]
    assert free_space_share(on_walls, image, voxel)[0] == pytest.approx(0.0)
    behind = on_walls * 1.5
    assert free_space_share(behind, image, voxel)[0] == pytest.approx(0.0)
    # just inside the margin of the wall at x = -3 (3 voxels and 5 % of the range)
    near_wall = np.column_stack([np.full(300, -3.0), rng.uniform(-0.3, 0.3, (300, 2))])
    margin = MARGIN_VOXELS * voxel + MARGIN_SHARE * 3.0
    share, _ = free_space_share(near_wall + np.array([0.9 * margin, 0, 0]), image, voxel)
    assert share == pytest.approx(0.0)
    share, _ = free_space_share(near_wall + np.array([1.2 * margin + 0.02, 0, 0]), image, voxel)
    assert share == pytest.approx(1.0)
    half = np.concatenate([inside[:200], on_walls[:200]])
    assert free_space_share(half, image, voxel)[0] == pytest.approx(0.5)
    assert free_space_share(inside[:150], image, voxel) == (None, 150)  # too few judged


def test_the_range_image_wraps_around_in_azimuth():
    """A return just east of the -x axis (azimuth +179.5 deg) covers a point just west of it
    (-179.5 deg): the neighbourhood crosses the seam."""
    wall = np.array([[-2.0, 0.017, 0.0]])  # +179.5 deg, 2 m
    image = RangeImage(wall, np.zeros(3))
    nearest, r = image.lookup(np.array([[-1.0, -0.0087, 0.0]]))  # -179.5 deg, 1 m
    assert nearest[0] == pytest.approx(2.0, abs=1e-3) and r[0] == pytest.approx(1.0, abs=1e-3)


def test_an_eye_far_from_its_cloud_is_not_judged_from():
    room = _room(np.random.default_rng(2))
    extent = float(np.linalg.norm(np.ptp(room, axis=0)))
    assert eye_near(room, np.zeros(3), extent)
    assert not eye_near(room, np.array([50.0, 0.0, 0.0]), extent)
    assert not eye_near(room[:0], np.zeros(3), extent)


def test_seen_free_space_separates_the_truth_from_wrong_poses():
    """Two scans of one room from two eyes 2 m apart: at their true relative pose the source
    does not lie in the reference's free space, from either eye's view; shifted 0.6 m, or
    turned 90 deg about the room's centre, the walls of the 6 x 4 m room land inside the
    reference's view of it; with the reference far from its own origin (a world frame), it
    is not measured."""
    rng = np.random.default_rng(3)
    room = _room(rng, 40_000)
    eye_a, eye_b = np.array([-1.0, 0.0, 0.0]), np.array([1.0, 0.5, 0.2])

    def scan(eye):  # what an eye sees: the nearest return in each fine direction
        image = RangeImage(room, eye, cell_deg=0.5)
        d = room - eye
        r = np.linalg.norm(d, axis=1)
        az, el = np.arctan2(d[:, 1], d[:, 0]), np.arcsin(d[:, 2] / r)
        row, col = image._cells(az, el)
        raw = np.full((image.rows, image.columns), np.inf)
        np.minimum.at(raw, (row, col), r)
        return room[r <= raw[row, col] + 0.02] - eye  # in the eye's own frame

    src, ref = scan(eye_a), scan(eye_b)
    truth = np.eye(4)
    truth[:3, 3] = eye_a - eye_b  # src frame -> ref frame
    eye = np.zeros(3)
    assert seen_free_space(src, ref, truth, 0.05, eye) < 0.01
    assert seen_free_space(ref, src, np.linalg.inv(truth), 0.05, eye) < 0.01
    shift = np.eye(4)
    shift[0, 3] = 0.6
    assert seen_free_space(src, ref, shift @ truth, 0.05, eye) > 0.15  # end walls inside
    turn = np.eye(4)  # a quarter turn about the room's centre (-eye_b in the reference)
    turn[:3, :3] = [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    turn[:3, 3] = -eye_b - turn[:3, :3] @ -eye_b
    assert seen_free_space(src, ref, turn @ truth, 0.05, eye) > 0.15
    far = np.array([500.0, 0.0, 0.0])
    assert seen_free_space(src, ref + far, truth, 0.05, eye) is None


def test_a_scan_hides_nothing_from_its_own_eye_and_much_from_another():
    """The room's visible surfaces from one eye (a scan) hide nothing from that eye; the whole
    room, walls behind the cube and all, seen from outside it hides about half of itself; a
    floor seen at a grazing angle is not hidden behind itself."""
    from pcreg.geometry.clouds import downsample_with_normals

    room = _room(np.random.default_rng(4), 40_000)
    eye = np.array([-1.0, 0.5, 0.2])
    image = RangeImage(room, eye, cell_deg=0.25, neighbours=False)
    nearest, r = image.lookup(room)
    scan = room[r <= nearest + 0.02]  # the first return along each fine ray
    down = downsample_with_normals(scan, 0.05)
    points, normals = np.asarray(down.points), np.asarray(down.normals)
    assert hidden_share(points, normals, eye, 0.05) < 0.005
    assert sensor_view(points, normals, eye, 0.05)
    whole = downsample_with_normals(room, 0.05)
    outside = np.array([12.0, 9.0, 0.0])
    share = hidden_share(np.asarray(whole.points), np.asarray(whole.normals), outside, 0.05)
    assert share > 0.3
    assert not sensor_view(np.asarray(whole.points), np.asarray(whole.normals), outside, 0.05)
    # a floor 1.5 m below the eye out to 6 m (up to 76 deg incidence), 5 cm apart
    grid = np.arange(-6.0, 6.0, 0.05)
    floor = np.array([(x, y, -1.5) for x in grid for y in grid if x * x + y * y < 36])
    up = np.tile([0.0, 0.0, 1.0], (len(floor), 1))
    assert hidden_share(floor, up, np.zeros(3), 0.05) < SENSOR_HIDDEN / 4
    rays = floor / np.linalg.norm(floor, axis=1, keepdims=True)  # as if seen face-on
    assert hidden_share(floor, rays, np.zeros(3), 0.05) > SENSOR_HIDDEN


def test_seen_free_space_is_not_taken_from_an_eye_that_is_not_the_sensor():
    """``sensor=False`` (the caller's :func:`sensor_view` said no) measures nothing; ``None``
    (not asked, as for streets) and ``True`` measure."""
    rng = np.random.default_rng(6)
    room = _room(rng)
    inside = rng.uniform([-2.0, -1.5, -1.0], [-1.0, 1.5, 1.0], size=(400, 3))
    args = (inside, room, np.eye(4), 0.05, np.zeros(3))
    assert seen_free_space(*args, False) is None
    assert seen_free_space(*args, None) == pytest.approx(1.0)
    assert seen_free_space(*args, True) == pytest.approx(1.0)


def test_a_cut_reference_says_nothing_about_what_was_cut_away():
    """A reference cut from a larger, fused cloud (the part of a room beyond x = 1, seen from
    an eye near the other end) keeps far walls whose near content was cut away: a source that
    holds that content (a box at x -1..0, in front of the far wall) lies in the image's free
    space, but outside the cut reference's hull, so the view does not count it; a source
    point inside the hull, in front of the far wall, is counted."""
    from pcreg.geometry.visibility import ReferenceView

    rng = np.random.default_rng(7)
    room = _room(rng, 40_000)
    box = rng.uniform([-1.0, -0.6, -1.0], [0.0, 0.6, 0.6], size=(3000, 3))
    scene = np.concatenate([room, box])
    eye = np.array([-2.5, 0.0, 0.0])
    ref, src = scene[scene[:, 0] > 1.0], scene[scene[:, 0] <= 1.0]
    naive, judged = free_space_share(src, RangeImage(ref, eye), 0.05)
    assert judged >= 200 and naive > 0.1  # the box, in front of the far wall
    view = ReferenceView(ref, eye)
    assert view.free_space(src, np.eye(4), 0.05) is None  # nothing of it inside the hull
    inside = rng.uniform([1.1, 0.8, -0.3], [1.2, 1.2, 0.3], size=(400, 3))  # before the far wall
    assert view.free_space(inside, np.eye(4), 0.05) == pytest.approx(1.0)
    assert not ReferenceView(ref, eye, sensor=False).judged
