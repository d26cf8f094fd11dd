"""Readings of a pair's unit: most plausible first, each landing in a network's band."""

from __future__ import annotations

import pytest

from pcreg.registration.scale import OBJECT_EXTENT, readings


def _r(extent):
    return [(r.units, r.model, r.scale) for r in readings(extent)]


@pytest.mark.parametrize(
    ("extent", "first"),
    [
        (4.5, ("metres", "indoor", 1.0)),  # a room
        (150.0, ("metres", "outdoor", 1.0)),  # a street
        (4500.0, ("millimetres", "indoor", 0.001)),  # a room in millimetres
        (450.0, ("metres", "outdoor", 1.0)),  # a site in metres, or a room in centimetres
        (1.5e5, ("millimetres", "outdoor", 0.001)),  # a street in millimetres
    ],
)
def test_the_most_plausible_reading_comes_first(extent, first):
    assert _r(extent)[0] == pytest.approx(first)


def test_objects_are_scaled_to_room_size():
    (units, model, scale), *rest = _r(0.23)  # the Stanford bunny in metres
    assert (units, model, rest) == ("object", "indoor", [])
    assert 0.23 * scale == pytest.approx(OBJECT_EXTENT)


def test_an_exact_unit_replaces_an_object_reading_only_for_a_room():
    """395 units: a room in centimetres (3.95 m) rather than a 0.4 m object; 230 units (the
    bunny in millimetres): a 4 m object rather than a 2.3 m room in centimetres."""
    assert _r(395.0) == [("metres", "outdoor", 1.0), ("centimetres", "indoor", 0.01)]
    assert _r(230.0) == [("metres", "outdoor", 1.0), ("object", "indoor", OBJECT_EXTENT / 230)]


def test_a_room_is_not_also_read_as_an_object_of_the_same_size():
    assert _r(4.5) == [("metres", "indoor", 1.0)]


def test_nothing_fits_a_cloud_of_a_thousand_kilometres():
    assert _r(1e9) == []
