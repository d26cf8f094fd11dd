"""What lies off a set of points' largest planes (``pcreg.geometry.planes``)."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg.geometry.planes import off_plane_share, off_planes


def _plane(rng, n, normal, offset, noise=0.0):
    normal = np.asarray(normal, float) / np.linalg.norm(normal)
    u = np.cross(normal, [1.0, 0.0, 0.0] if abs(normal[0]) < 0.9 else [0.0, 1.0, 0.0])
    u /= np.linalg.norm(u)
    v = np.cross(normal, u)
    a, b = rng.uniform(-2, 2, (2, n))
    pts = a[:, None] * u + b[:, None] * v + (offset + rng.normal(0, noise, n))[:, None] * normal
    return pts, np.tile(normal, (n, 1))


def test_three_tilted_planes_leave_nothing_and_a_sphere_is_what_lies_off_them(rng):
    """Three planes at arbitrary tilts (not the axes) with 1 cm noise: every point is on one
    of them. A sphere of 300 points beside them is 300 of the whole."""
    tilts = (([0.2, 0.1, 1.0], 0.0), ([1.0, 0.3, -0.1], 1.0), ([0.1, 1.0, 0.4], -0.5))
    parts = [_plane(rng, 2000, n, o, 0.01) for n, o in tilts]
    # 10 m apart along (1, 1, 1), which every normal leans on, so that no patch meets another
    # plane (where two planes cross, the points are within the tolerance of both)
    pts = np.vstack([p + 10.0 * i for i, (p, _) in enumerate(parts)])
    nrm = np.vstack([n for _, n in parts])
    assert off_plane_share(pts, nrm, 0.05) == pytest.approx(0.0, abs=0.002)
    # two planes only are taken: the third's points are what remains
    assert off_plane_share(pts, nrm, 0.05, planes=2) == pytest.approx(1 / 3, abs=0.01)
    ball = rng.normal(size=(300, 3))
    ball /= np.linalg.norm(ball, axis=1, keepdims=True)
    ball = ball * 0.3 + [5.0, 5.0, 5.0]  # clear of every plane
    share = off_plane_share(np.vstack([pts, ball]), np.vstack([nrm, ball - [5.0, 5.0, 5.0]]), 0.05)
    assert share == pytest.approx(300 / 6300, abs=0.003)


def test_a_normal_off_by_a_few_degrees_is_refitted_and_few_points_say_nothing(rng):
    """A hypothesis' normal tilted by 5 deg keeps a 4 m plane's far ends off it; the refit
    takes the whole plane. Under 10 points there is no measurement: 1.0."""
    pts, nrm = _plane(rng, 3000, [0.0, 0.0, 1.0], 0.0, 0.005)
    tilt = np.radians(5.0)
    noisy = np.tile([np.sin(tilt), 0.0, np.cos(tilt)], (len(pts), 1))
    assert off_plane_share(pts, noisy, 0.05, planes=1) < 0.002
    assert off_plane_share(pts[:9], nrm[:9], 0.05) == 1.0


def test_a_zero_normal_is_no_plane(rng):
    """A zero normal among the hypotheses (a point without a neighbourhood) would make the
    plane through the origin that every point lies within 0 of; it is skipped."""
    pts, nrm = _plane(rng, 2000, [0.0, 0.0, 1.0], 0.0, 0.005)
    ball = rng.normal(size=(100, 3)) * 0.2 + [0.0, 0.0, 3.0]
    pts = np.vstack([pts, ball])
    nrm = np.vstack([nrm, np.tile([0.0, 0.0, 1.0], (100, 1))])
    nrm[::97] = 0.0
    assert off_plane_share(pts, nrm, 0.05, planes=1) == pytest.approx(100 / 2100, abs=0.005)
    assert off_plane_share(pts, np.zeros_like(nrm), 0.05) == 1.0


def test_off_planes_marks_the_points_off_the_largest_planes(rng):
    """The mask behind the share: a ball beside two planes is exactly the points off them;
    under 10 points or without a usable normal there is no mask."""
    n = 3000
    floor = np.c_[rng.uniform(0, 2, n), rng.uniform(0, 2, n), np.zeros(n)]
    wall = np.c_[np.zeros(n), rng.uniform(0, 2, n), rng.uniform(0, 2, n)]
    ball = rng.normal(size=(300, 3))
    ball = ball / np.linalg.norm(ball, axis=1, keepdims=True) * 0.3 + [1.0, 1.0, 1.0]
    pts = np.vstack([floor, wall, ball])
    nrm = np.vstack([np.tile([0.0, 0, 1], (n, 1)), np.tile([1.0, 0, 0], (n, 1)), ball - 1.0])
    off = off_planes(pts, nrm / np.linalg.norm(nrm, axis=1, keepdims=True), 0.02, planes=2)
    assert off is not None and off.dtype == bool
    np.testing.assert_array_equal(off, np.r_[np.zeros(2 * n, bool), np.ones(300, bool)])
    assert off_planes(pts[:9], nrm[:9], 0.02) is None
    assert off_planes(pts, np.zeros_like(nrm), 0.02) is None
