"""Which readings of a pair's unit ``auto`` tries, and in what order
(:func:`pcreg.registration.auto.register_auto`; the readings themselves:
:mod:`pcreg.registration.scale`): an object reading by a power of ten only where the clouds are
sampled like a room at that scale (:func:`dense_objects`), readings under which the clouds are
sparser than the network's voxel last or not at all (:func:`by_sampling`), and one more reading
where every reading was refused as too small for the network (:func:`finer_reading`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from pcreg.registration.checks import cloud_extent
from pcreg.registration.scale import (
    INDOOR_BAND,
    METRES_PER_UNIT,
    OBJECT_EXTENT,
    Reading,
    reading_for,
)

# ``pipe`` is a :class:`~pcreg.registration.pipeline.Registration` (typed Any: the pipeline
# imports :mod:`pcreg.registration.auto`, which imports this module)
Registration = Any

__all__ = [
    "CROWDED_OBJECT",
    "OBJECT_APART",
    "SPARSE_READING",
    "by_sampling",
    "dense_objects",
    "finer_reading",
]

logger = logging.getLogger(__name__)

#: a reading under which the clouds barely thin at the network's voxel (occupied voxels over
#: points above this) is not tried where another reading is plausible, and tried last
#: otherwise: its unit is most likely wrong. Measured: KITTI scans in metres 0.17 at 0.3 m,
#: 3DMatch fragments 0.2-0.4 at 5 cm, the Stanford bunny in millimetres read as metres 1.0
#: (its 0.5 mm spacing becomes 0.5 m, sparser than any LiDAR scan). Tried after a refused
#: millimetre-object reading, that metres reading cost 20-35 s (every point a superpoint at
#: 0.3 m) and never registered (``pcreg benchmark --zero-shot``, bunny (mm): 4 of 66 draws).
SPARSE_READING = 0.9
#: an object reading more than this factor from a plausible exact-unit reading is not tried:
#: two KITTI scans (a 160 m street in metres) read as an object at x0.045 registered a wrong
#: pose; a scan that is plausible as metres is not a 4 m object unless the user says so
OBJECT_APART = 10.0


#: an object reading by a power of ten (a guess: a room scaled down) under which the smaller
#: cloud keeps more than this many points at the network's voxel is scaled to OBJECT_EXTENT
#: instead, where it costs a fraction: 8x a 3DMatch fragment's 4,000-4,800 at 5 cm (TUM
#: RGB-D frames keep 2,100-2,500; a closed 3 m box room sampled every 2.5 cm, 21,600). A
#: 1.4 m ball cut from a TUM frame (145,000 points) read x10 as a 14 m "room" kept 48,780: a
#: 2.5 GB memory estimate and 13 s for the pair; at x2.2 it registered right in 1.1 s
CROWDED_OBJECT = 40_000


def _count(
    reading: Reading, src: np.ndarray, ref: np.ndarray, seen: dict[tuple[str, float], int]
) -> tuple[int, int]:
    """The occupied voxels of the smaller cloud of a pair (fewer points) at ``reading``'s
    network voxel, and its points; one voxel count per model and scale, kept in ``seen``
    (the pair's)."""
    from pcreg.registration.checks import voxel_count
    from pcreg.registration.resources import SHIPPED_FOOTPRINTS

    cloud = src if len(src) <= len(ref) else ref
    key = (reading.model, reading.scale)
    if key not in seen:
        voxel = SHIPPED_FOOTPRINTS[reading.model].voxel / reading.scale  # in the input's unit
        seen[key] = voxel_count(cloud, voxel)
    return seen[key], len(cloud)


def _sparse(
    reading: Reading, src: np.ndarray, ref: np.ndarray, seen: dict[tuple[str, float], int]
) -> bool:
    """Whether the smaller cloud of a pair barely thins at ``reading``'s network voxel
    (occupied voxels over points above :data:`SPARSE_READING`; :func:`_count`)."""
    voxels, points = _count(reading, src, ref, seen)
    return voxels > SPARSE_READING * points


def dense_objects(
    reads: list[Reading],
    src: np.ndarray,
    ref: np.ndarray,
    extent: float,
    sparse: dict[tuple[str, float], int],
) -> list[Reading]:
    """``reads`` with each object reading scaled by a power of ten (a room scaled down,
    registered as the room it was: :func:`~pcreg.registration.scale.readings`) under which
    the clouds are sparser than the network's voxel (:func:`_sparse`) scaled to
    :data:`~pcreg.registration.scale.OBJECT_EXTENT` instead, as other objects are; a reading
    that then repeats an earlier one is dropped. A room scaled down keeps the room's sampling
    at its voxel; a dense object scan does not: two halves of a Stanford dragon view (0.2 m)
    read x100 as a 20 m room put every point in its own voxel, 20,000 points and 1,000-1,200
    superpoints per cloud into the network (a 3DMatch fragment: 4,000 and 100), 2.5 s per
    network pass and 12 s for the pair (2-core AMD EPYC, ONNX Runtime); at 4 m, 4,000 points
    and 300 superpoints. So too where the smaller cloud keeps more than
    :data:`CROWDED_OBJECT` points at that voxel (a dense crop of a room, not a room scaled
    down), where that scales it down. A reading so rescaled is named in the pair's first
    exact unit where one is plausible (metres for a 1.9-unit crop of a room, which was read as
    1.9 mm). One voxel count per such reading, none on any other path."""
    out: list[Reading] = []
    for reading in reads:
        scale = OBJECT_EXTENT / extent
        if reading.object and reading.scale != scale:
            voxels, points = _count(reading, src, ref, sparse)
            crowded = voxels > CROWDED_OBJECT and scale < reading.scale
            if voxels > SPARSE_READING * points or crowded:
                logger.info("units: an object read x%.4g, not x%.4g: at x%.4g its points are "
                            "%s (not a room scaled down)", scale, reading.scale, reading.scale,
                            "sparser than the network's voxel" if voxels > SPARSE_READING *
                            points else f"{voxels} at the network's voxel")  # fmt: skip
                # an object of any size: named in the pair's first exact unit where one is
                # plausible (a 1.9-unit crop of a room in metres was read as 1.9 mm, and its
                # errors in metres came out 1000x too small)
                exact = next((r.units for r in reads if not r.object), reading.units)
                reading = replace(reading, units=exact, scale=scale)
        if all(r.model != reading.model or r.scale != reading.scale for r in out):
            out.append(reading)
    return out


def by_sampling(
    reads: list[Reading],
    src: np.ndarray,
    ref: np.ndarray,
    sparse: dict[tuple[str, float], int],
    keep_sparse: bool = False,
    skipped: list[Reading] | None = None,
) -> Iterator[Reading]:
    """``reads`` without those under which the clouds are sparser than their network's voxel
    where another reading is plausible (:data:`SPARSE_READING`; ``keep_sparse``: moved to
    the end instead, as they are where none is), and without object readings far from a
    plausible exact unit (:data:`OBJECT_APART`); the sparse readings left out are appended
    to ``skipped``. One voxel count per reading (a KITTI scan: ~8 ms), none for a reading
    already counted in ``sparse`` (:func:`dense_objects`)."""
    if len(reads) < 2:  # nothing to reorder: no voxel count on the common path
        yield from reads
        return
    plausible = [r for r in reads if not _sparse(r, src, ref, sparse)]
    exact = [r for r in plausible if not r.object]
    deferred = []
    for reading in reads:
        if reading.object and any(
            max(r.scale, reading.scale) > OBJECT_APART * min(r.scale, reading.scale) for r in exact
        ):  # a scan that is plausible in an exact unit is not an object far from it
            logger.info("units: not read as an object (x%.4g): plausible in %s",
                        reading.scale, exact[0].units)  # fmt: skip
        elif reading not in plausible:
            deferred.append(reading)
        else:
            yield reading
    if plausible and not keep_sparse:
        for reading in deferred:
            logger.info("units: not read as %s (x%.4g): sparser than the network's voxel",
                        reading.units, reading.scale)  # fmt: skip
        if skipped is not None:
            skipped += deferred
        return
    yield from deferred


def finer_reading(
    pipe: Registration, src: np.ndarray, ref: np.ndarray, tried: list[dict[str, object]]
) -> Reading | None:
    """The reading for a pair too small for the network under every reading of its units that was
    ``tried`` (``_register_scene``'s entries, each with its ``scale`` and ``model``): the
    ``indoor`` network, the pair scaled so the smaller cloud spans
    :data:`~pcreg.registration.scale.OBJECT_EXTENT` and at least 2x the largest ``indoor``
    scale tried (a surface's superpoints grow about 4x), but the larger cloud within the
    ``indoor`` band's 20 m; only where that makes the network's superpoint voxel (in the
    input's units) at most half the finest tried. Scaled up from its unit's metres (or under
    ``--units object``), it is an object (:attr:`~pcreg.registration.scale.Reading.object`);
    scaled down, a scene larger than the band, read as a room: a 22 m corridor in metres,
    refused under the street reading and as a 0.16x object, is read at 0.32x (an 8 m room; at
    the band's top, 0.81x, the network took 17 s on it). Named in the unit the user gave
    (``--units``), else in the first reading's (metres for a 1-20 m pair). None with a named
    network.

    Found by hostile runs: a 2.2 m ball (1.2 m radius) cut from a TUM RGB-D frame kept 15
    superpoints at the ``indoor`` network's 0.4 m, 16 needed, and a bare 22 m corridor in metres
    (read as a street) too few at the ``outdoor`` network's 4.8 m; both were refused with exit 2, as
    bad input."""
    from pcreg.registration.resources import SHIPPED_FOOTPRINTS

    if pipe.model is not None or not tried:
        return None
    small = min(cloud_extent(src), cloud_extent(ref))
    extent = max(cloud_extent(src), cloud_extent(ref))
    if pipe.units == "object":
        units = reading_for("object", extent).units
    else:
        units = pipe.units or str(tried[0]["units"])
    indoor = [float(t["scale"]) for t in tried if t.get("model") == "indoor"]  # type: ignore[arg-type]
    scale = min(
        INDOOR_BAND[1] / max(extent, 1e-12),
        max(OBJECT_EXTENT / max(small, 1e-12), 2.0 * max(indoor, default=0.0)),
    )
    coarse = [
        SHIPPED_FOOTPRINTS[str(t["model"])].coarse_voxel / float(t["scale"])  # type: ignore[arg-type]
        for t in tried
        if t.get("model") in SHIPPED_FOOTPRINTS
    ]
    own = SHIPPED_FOOTPRINTS["indoor"].coarse_voxel / scale
    if not (np.isfinite(scale) and scale > 0) or not coarse or own > 0.5 * min(coarse):
        return None
    # scaled up from the unit's own metres, or named an object by the user: an object
    up = scale > METRES_PER_UNIT.get(units, 1.0)
    return Reading(units, "indoor", scale, pipe.units == "object" or up)
