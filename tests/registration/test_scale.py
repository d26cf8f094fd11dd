"""Readings of a pair's unit: most plausible first, each landing in a network's band."""

from __future__ import annotations

import pytest

from pcreg.registration.scale import OBJECT_EXTENT, reading_for, readings


def _r(extent):
    return [(r.units + " object" * r.object, r.model, r.scale) for r in readings(extent)]


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
    assert (units, model, rest) == ("metres object", "indoor", [])
    assert 0.23 * scale == pytest.approx(OBJECT_EXTENT)


def test_an_object_is_read_in_the_unit_under_which_it_is_under_a_metre():
    """The bunny in millimetres is a millimetre object (its errors then convert to metres by
    0.001), not an "object" of no unit; ``--units object`` reads it the same way."""
    (obj,) = [r for r in readings(230.0) if r.object]
    assert (obj.units, obj.metres_per_unit) == ("millimetres", 0.001)
    assert reading_for("object", 230.0) == obj
    assert reading_for("object", 0.23).units == "metres"
    assert reading_for("millimetres", 230.0) == obj  # under 1 m in mm: an object of it
    assert reading_for("centimetres", 395.0).metres_per_unit == 0.01


def test_an_exact_unit_replaces_an_object_reading_only_for_a_room():
    """395 units: a room in centimetres (3.95 m) rather than a 0.4 m object; 230 units (the
    bunny in millimetres): a 4 m object rather than a 2.3 m room in centimetres."""
    assert _r(395.0) == [("metres", "outdoor", 1.0), ("centimetres", "indoor", 0.01)]
    assert _r(230.0) == [
        ("metres", "outdoor", 1.0), ("millimetres object", "indoor", OBJECT_EXTENT / 230)
    ]  # fmt: skip


def test_a_room_is_not_also_read_as_an_object_of_the_same_size():
    assert _r(4.5) == [("metres", "indoor", 1.0)]


def test_nothing_fits_a_cloud_of_a_thousand_kilometres():
    assert _r(1e9) == []


@pytest.mark.parametrize(
    ("text", "unit"),
    [("m", "metres"), ("Meters", "metres"), ("mm", "millimetres"),
     ("centimeter", "centimetres"), ("object", "object"), ("furlongs", "furlongs")],
)  # fmt: skip
def test_a_unit_may_be_written_as_people_write_it(text, unit):
    """A newcomer's ``--units meters`` was refused (only ``metres`` was taken)."""
    from pcreg.registration.scale import unit_name

    assert unit_name(text) == unit


def test_the_command_line_takes_the_spellings_and_refuses_others_in_one_line(capsys):
    from pcreg.cli import main
    from pcreg.commands.register import _units

    assert _units("mm") == "millimetres"
    with pytest.raises(SystemExit) as out:
        main(["register", "a.npy", "b.npy", "--units", "furlongs"])
    assert out.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == ("pcreg register: error: argument --units: unknown unit 'furlongs': use one "
                   "of metres, millimetres, centimetres, object (or m, mm, cm) "
                   "(see `pcreg register --help`)")  # fmt: skip


def test_the_python_api_takes_the_spellings_too():
    from pcreg.errors import InputError
    from pcreg.registration.pipeline import Registration

    assert Registration(method="auto", units="mm").units == "millimetres"
    with pytest.raises(InputError, match="unknown unit 'furlongs'"):
        Registration(method="auto", units="furlongs")
