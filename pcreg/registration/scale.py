"""Units and scale: how a pair is brought to the scale a shipped network was trained at.

Rigid registration commutes with a uniform scaling: if ``T_w`` registers ``s * src`` onto
``s * ref``, then the same rotation with the translation divided by ``s`` registers ``src`` onto
``ref``. So the learned path can run any pair at the scale its network knows and return the
transform in the user's units, exactly.

What it cannot know is the unit: a 5,000-unit cloud may be a room in millimetres or a
street in centimetres, and a 200-unit one a street in metres or an object in millimetres. The
clouds' extent (robust bounding-box diagonal, :func:`~pcreg.registration.checks.cloud_extent`)
proposes the readings that put the pair in a band a network was trained on, most plausible first:

* **metres**: 1-20 m is a room (``indoor``, trained on 3-8 m rooms), 20-1000 m a street or a
  site (``outdoor``, trained on KITTI-like scans, ~80-240 m);
* **millimetres / centimetres** (x0.001, x0.01), when they land in one of those bands;
* **an object** (under 1 m in whatever unit): scaled by a power of ten where that makes a
  3-20 m room (a room scaled down is then registered exactly as itself), else to
  :data:`OBJECT_EXTENT` metres, and registered as a small room by the ``indoor`` network.
  ``auto`` keeps the power of ten only where the clouds are sampled like a room at that
  scale: a dense object scan becomes a 20 m room with every point its own voxel there, and
  is scaled to :data:`OBJECT_EXTENT` instead
  (:func:`pcreg.registration.reading_choice.dense_objects`).
  Measured on the Stanford bunny range scans (0.22-0.24 m across): at 4 m the network's
  pyramid has the size of a 3DMatch fragment's (7,800 vs 8,300 points), and at 2.5 m too few
  superpoints remain for some views.

The pipeline tries them in order and judges every estimate together
(:mod:`pcreg.registration.verdict`); ``--json`` reports the reading that registered: the unit
the file was read in (``units``: metres, millimetres or centimetres, also for an object, which
is named by the first of them under which it is under 1 m, or, where it is scaled to
:data:`OBJECT_EXTENT` in place of a power of ten, by the first exact unit the pair is
plausible in: :func:`pcreg.registration.reading_choice.dense_objects`), whether it was scaled
as an object (``object``) and the factor (``scale``). A 3.95 m room in centimetres and a 0.4 m
object in millimetres are the same 395 units, so the reading is the search's best guess, which
``--units`` overrides. The transform is in the input's units either way; lengths reported in
metres are converted by the unit read (:data:`METRES_PER_UNIT`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "INDOOR_BAND",
    "METRES_PER_UNIT",
    "OBJECT_EXTENT",
    "OUTDOOR_BAND",
    "UNITS",
    "UNIT_ALIASES",
    "Reading",
    "reading_for",
    "readings",
    "unit_name",
]

#: extents (metres) registered as rooms by ``indoor`` and as streets / sites by ``outdoor``
INDOOR_BAND = (1.0, 20.0)
OUTDOOR_BAND = (20.0, 1000.0)
#: the extent (metres) an object is scaled to for the ``indoor`` network
OBJECT_EXTENT = 4.0
#: an exact unit replaces an object reading of about the same scale only where it makes a
#: room at least this large (metres): the Stanford bunny in millimetres read in centimetres is
#: a 2.3 m "room", where FPFH + RANSAC at the indoor voxel found 19/22 pairs against 22/22 for
#: the 4 m object reading (``pcreg benchmark --zero-shot``)
ROOM_MIN = 3.0
_UNITS = (("metres", 1.0), ("millimetres", 0.001), ("centimetres", 0.01))
#: the units a user may name (``--units``)
UNITS = ("metres", "millimetres", "centimetres", "object")
#: metres per input unit, by the unit a pair was read in
METRES_PER_UNIT = dict(_UNITS)
#: other spellings of :data:`UNITS` a user may write (a newcomer's ``--units meters`` was
#: refused): symbols, singulars and the American spellings
UNIT_ALIASES = {
    **{a: "metres" for a in ("m", "metre", "meter", "meters")},
    **{a: "millimetres" for a in ("mm", "millimetre", "millimeter", "millimeters")},
    **{a: "centimetres" for a in ("cm", "centimetre", "centimeter", "centimeters")},
}


def unit_name(text: str) -> str:
    """The unit of :data:`UNITS` that ``text`` names (any case; :data:`UNIT_ALIASES` too);
    ``text`` itself where it names none (the caller refuses it)."""
    key = text.strip().lower()
    return key if key in UNITS else UNIT_ALIASES.get(key, text)


@dataclass(frozen=True)
class Reading:
    """One reading of a pair's unit: multiply the (centred) clouds by ``scale`` to get the
    metres the ``model`` network works in. ``units``: the unit the input is read in,
    ``"metres"``, ``"centimetres"`` or ``"millimetres"``; ``object``: it is an object under
    1 m in that unit, scaled up for the network (by a power of ten, or to
    :data:`OBJECT_EXTENT`) rather than by the unit's own factor."""

    units: str
    model: str
    scale: float
    object: bool = False

    @property
    def metres_per_unit(self) -> float:
        """Metres per input unit under this reading (1 for metres, 0.001 for millimetres)."""
        return METRES_PER_UNIT[self.units]


def _band(extent_m: float) -> str | None:
    if INDOOR_BAND[0] <= extent_m <= INDOOR_BAND[1]:
        return "indoor"
    if OUTDOOR_BAND[0] < extent_m <= OUTDOOR_BAND[1]:
        return "outdoor"
    return None


def _object_scale(extent: float) -> float:
    """The factor an object of ``extent`` is scaled by: the smallest power of ten that makes
    it a room of :data:`ROOM_MIN` to 20 m (a room scaled down is registered as itself, on the
    same voxel grid), else :data:`OBJECT_EXTENT` / ``extent``."""
    for k in range(1, 16):
        if ROOM_MIN <= extent * 10.0**k <= INDOOR_BAND[1]:
            return 10.0**k
        if extent * 10.0**k > INDOOR_BAND[1]:
            break
    return OBJECT_EXTENT / extent


def readings(extent: float) -> list[Reading]:
    """The readings of a pair whose larger cloud spans ``extent`` (in its unit), most
    plausible first: metres, millimetres, centimetres, each where it lands in a network's
    band, or as an object where it is under 1 m. A reading within 2x of an earlier one's
    scale for the same network is left out (it would register the same way), except that a
    unit making a room of at least :data:`ROOM_MIN` replaces an object reading in its place."""
    out: list[Reading] = []
    for units, factor in _UNITS:
        metres = extent * factor
        model, obj = _band(metres), False
        if model is None and metres < INDOOR_BAND[0]:  # under 1 m in this unit: an object
            model, factor, obj = "indoor", _object_scale(extent), True
        if model is None:
            continue
        same = [
            i for i, r in enumerate(out)
            if r.model == model and max(r.scale, factor) < 2 * min(r.scale, factor)
        ]  # fmt: skip
        if not same:
            out.append(Reading(units, model, factor, obj))
        elif out[same[0]].object and metres >= ROOM_MIN:  # an exact unit is better
            out[same[0]] = Reading(units, model, factor)
    return out


def reading_for(units: str, extent: float) -> Reading:
    """The reading a user names (``--units``) for a pair spanning ``extent`` in its unit: an
    exact unit runs the network of its band (``indoor`` below 20 m, ``outdoor`` above, and a
    scan under 1 m in that unit as an object of it), ``"object"`` scales it as an object,
    read in the first unit under which it is under 1 m (metres where none is)."""
    if units == "object":
        unit = next((u for u, f in _UNITS if extent * f < INDOOR_BAND[0]), "metres")
        return Reading(unit, "indoor", _object_scale(extent), True)
    factor = METRES_PER_UNIT[units]
    metres = extent * factor
    if metres < INDOOR_BAND[0]:
        return Reading(units, "indoor", _object_scale(extent), True)
    return Reading(units, "indoor" if metres <= INDOOR_BAND[1] else "outdoor", factor)
