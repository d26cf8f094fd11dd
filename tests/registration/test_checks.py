"""Checks that need no model: what they refuse, what they say, and that they run before any
network loads."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg.errors import InputError
from pcreg.registration.checks import (
    MIN_POINTS,
    TooFewPointsError,
    check_counts,
    check_device,
    check_pair,
    check_voxel_size,
    voxel_count,
)
from pcreg.registration.pipeline import Registration


def _room(rng, n=3000, size=4.0):
    return rng.uniform(0, size, (n, 3))


@pytest.mark.parametrize("n", [1, 2, 3, MIN_POINTS - 1])
def test_few_points_say_too_few(rng, n):
    with pytest.raises(
        TooFewPointsError, match=rf"too few points: {n} given, at least {MIN_POINTS}"
    ):
        check_pair(_room(rng, n), _room(rng))


def test_identical_points_say_identical_not_scales(rng):
    same = np.full((500, 3), 7.0)
    with pytest.raises(InputError, match="all 500 points coincide") as err:
        check_pair(same, _room(rng))
    assert "scales differ" not in str(err.value)


def test_coincident_points_are_counted_as_given_not_as_one_position(rng):
    """5,000 copies of one point: all of them named, not "too few points: 1 given" (the
    repeats are dropped before the checks; the message must still know the count)."""
    same = np.tile([[1.0, 2.0, 3.0]], (5000, 1))
    with pytest.raises(InputError) as err:
        Registration("indoor", method="fpfh-ransac")(same, _room(rng), ("a.npy", "b.npy"))
    assert str(err.value) == "a.npy: all 5000 points coincide (zero extent): nothing to register"


def test_a_cloud_rounded_to_whole_metres_names_both_counts(rng):
    """The 3DMatch demo source rounded to whole metres: 15953 points on 17 positions. The
    message names both numbers (it said "17 given")."""
    rounded = np.round(rng.uniform(0, 2.4, (15953, 3)))  # 0, 1 or 2 per axis
    distinct = len(np.unique(rounded, axis=0))
    assert distinct < MIN_POINTS
    expected = (
        f"src: 15953 points collapse to {distinct} distinct positions (repeated points count "
        f"once); at least {MIN_POINTS} are needed to register (coordinates rounded to whole "
        "units?)"
    )
    with pytest.raises(TooFewPointsError) as err:
        check_pair(rounded, _room(rng))
    assert str(err.value) == expected
    with pytest.raises(TooFewPointsError) as err:  # through the pipeline, repeats dropped there
        Registration("indoor", method="fpfh-ransac")(rounded, _room(rng))
    assert str(err.value) == expected
    with pytest.raises(TooFewPointsError) as err:
        check_counts(_room(rng), rounded, ("a.npy", "b.npy"))
    assert str(err.value) == expected.replace("src:", "b.npy:")


def test_zero_extent_with_a_few_strays(rng):
    pts = np.zeros((20_000, 3))
    pts[:100] = rng.uniform(0, 1, (100, 3))  # 101 positions, 99.5 % of the points on one
    with pytest.raises(InputError, match="zero extent: at least 98% of its 20000 points"):
        check_pair(_room(rng), pts)
    # with fewer distinct positions than registration needs, that is what is said
    with pytest.raises(TooFewPointsError, match="19905 points collapse to 6 distinct positions"):
        check_pair(_room(rng), pts[95:])


def test_real_scale_mismatch_still_refused(rng):
    with pytest.raises(InputError, match="scales differ by more than 10x"):
        check_pair(_room(rng), _room(rng) * 1000)
    assert check_pair(_room(rng), _room(rng) * 2)[0] > 0  # 2x is accepted


def test_voxel_count_exact_far_from_origin(rng):
    pts = np.floor(_room(rng) / 0.5) * 0.5 + 0.25  # cell centres of a 0.5 grid
    for offset in (0.0, 4.2e6, 1e9):
        assert voxel_count(pts + offset, 0.5) == voxel_count(pts, 0.5)


@pytest.mark.parametrize("voxel", [0.01, 0.3, 2.0])
def test_voxel_count_equals_the_plain_row_count(rng, voxel):
    """The fast path (one int64 per cell, sorted runs) against np.unique over the cells'
    integer coordinates, on a cloud with repeated cells, a single point and no point."""
    pts = np.concatenate([_room(rng), _room(rng)[:500]])
    plain = len(np.unique(np.floor((pts - pts.min(0)) / voxel), axis=0))
    assert voxel_count(pts, voxel) == plain
    assert voxel_count(pts[:1], voxel) == 1
    assert voxel_count(pts[:0], voxel) == 0


def test_voxel_size_too_small_is_refused():
    with pytest.raises(InputError, match="1e-09 is too small"):
        check_voxel_size(1e-9, 4.0)
    check_voxel_size(0.05, 4.0)


@pytest.mark.parametrize("device", ["foo", "cuda:99", "tpu"])
def test_unusable_devices(device):
    import torch

    if torch.cuda.is_available() and device == "cuda:99" and torch.cuda.device_count() > 99:
        pytest.skip("a machine with 100 GPUs")
    with pytest.raises(InputError, match="device"):
        check_device(device)


def test_refusals_come_before_the_model_loads(rng):
    loads = []

    def loader(model, device):
        loads.append(model)
        raise AssertionError("the network must not load for a refused pair")

    pipe = Registration(networks=loader)
    for src, ref in [
        (_room(rng, 3), _room(rng)),  # too few
        (_room(rng), _room(rng) * 1000),  # scales
        (_room(rng) * 1000, _room(rng) * 1000),  # a room in millimetres: memory
    ]:
        with pytest.raises(InputError):
            pipe(src, ref)
    assert loads == []


def test_registrar_names_nan_input(rng):
    from pcreg.errors import NonFiniteError
    from pcreg.registration.loading import load_network

    net = load_network("indoor").network
    bad = rng.uniform(0, 3, (2000, 3))
    bad[7] = np.nan
    with pytest.raises(NonFiniteError, match="src of pair 0: has NaN/Inf"):
        net(bad, rng.uniform(0, 3, (2000, 3)))


def test_planes_and_lines_are_refused(rng):
    plane = np.c_[rng.uniform(0, 4, (2000, 2)), np.zeros(2000)]
    line = np.c_[rng.uniform(0, 4, 2000), np.zeros((2000, 2))]
    with pytest.raises(InputError, match="all points lie on one plane"):
        check_pair(_room(rng), plane)
    with pytest.raises(InputError, match="all points lie on one line"):
        check_pair(line, _room(rng))
    noisy = plane + np.c_[np.zeros((2000, 2)), rng.normal(0, 0.01, 2000)]
    assert check_pair(_room(rng), noisy)[1] > 0  # a wall with 1 cm of relief is a scan


def test_astronomical_coordinates_are_refused_not_a_crash(rng):
    """A LAS scale of 1e300 gives coordinates near 1e305, whose squares overflow: refused
    with the magnitude (it was an internal error: eigenvalues did not converge)."""
    with pytest.raises(InputError, match=r"coordinates reach [\d.]+e\+305: beyond 1e\+15"):
        check_pair(_room(rng) * 1e305, _room(rng))
    # up to 1e12 m the flatness test still works (its covariance is of unit-sized numbers)
    big = _room(rng) * 1e12
    assert check_pair(big, big)[0] > 0


def test_far_strays_are_dropped(rng):
    from pcreg.registration.cleaning import drop_far

    room = _room(rng) - 2.0
    far = np.vstack([room, [[1e9, 0, 0], [0, -1e15, 0], [1e300, 1, 1]]])
    np.testing.assert_array_equal(drop_far(far), room)
    assert drop_far(room) is room
