"""``method="auto"``, the default: the learned path wherever it registers, any unit, any scan.

For each plausible reading of the pair's unit (:mod:`pcreg.registration.scale`; a scan that
barely thins at a network's voxel under a reading is tried last, and an object reading far
from a plausible exact unit is not tried) the pair is scaled to the metres its network was
trained at, then estimated in steps:

1. **learned**: the network under its orientation search (Manhattan cube hypotheses for
   ``indoor``, the identity for the rotation-invariant ``outdoor``);
2. **classical + learned**: Open3D FPFH + RANSAC proposes a pose (a hypothesis source that
   needs no Manhattan structure and no upright scan), and the network is run again from it.

Objects (a pair under 1 m in its unit) run step 1 only where a hypothesis source applies (a
small Manhattan room does; a bunny has no Manhattan axes), then step 2, where only the
network's estimate from FPFH's pose is kept, then step 2 again at 1.5x the voxel.

Each step is :func:`pcreg.registration.steps.attempt`. Every finished estimate is a
:class:`~pcreg.registration.verdict.Candidate`. After each step
one verdict over all candidates so far (:func:`~pcreg.registration.verdict.judge`: the best
score, and no different pose nearly as well supported) decides; the search stops at the first
registered verdict, and otherwise returns the best candidate with ``registered`` false and the
reason (``ambiguous: ...`` with the other pose where two poses compete). The result says which
path produced it (``method_used``), which reading of the units (``units``, ``scale``) and
lists the readings tried with their best scores (``readings``).

``strict``: a registered estimate stands only where the other, independent path (the
network's search vs FPFH + RANSAC alone) reached the same pose
(:func:`~pcreg.registration.verdict.different` is false).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from pcreg.errors import InputError
from pcreg.registration import steps
from pcreg.registration.checks import check_pair, cloud_extent
from pcreg.registration.result import RegistrationResult
from pcreg.registration.scale import (
    INDOOR_BAND,
    METRES_PER_UNIT,
    OBJECT_EXTENT,
    Reading,
    reading_for,
    readings,
)

if TYPE_CHECKING:
    from pcreg.registration.verdict import Candidate

# ``pipe`` is a :class:`~pcreg.registration.pipeline.Registration` and ``plan`` its ``_Plan``:
# typed Any here because the pipeline imports this module (no import cycle)
Registration = Any
_Plan = Any

__all__ = ["register_auto"]

logger = logging.getLogger(__name__)

#: the steps for rooms and streets, and for objects (module doc). On objects only the
#: network's estimate from FPFH's pose counts: on the zero-shot bunny and dragon draws FPFH +
#: RANSAC + ICP alone added 2 successes and 1 wrong registration; the second FPFH runs at
#: 1.5x the voxel (other features, other hypotheses).
SCENE_STEPS = ("learned", "classical")
OBJECT_STEPS = ("learned, where a source applies", "object", "classical, coarser")


def register_auto(
    pipe: Registration,
    src: np.ndarray,
    ref: np.ndarray,
    names: tuple[str, str],
    origins: np.ndarray,
    start: float,
    *,
    exhaustive: bool = False,
) -> RegistrationResult:
    """Register a pair already in its working frame (``src``, ``ref`` shifted by
    ``origins (2, 3)``, float64) with ``pipe``'s settings; see the module doc. Every finished
    estimate is a :class:`~pcreg.registration.verdict.Candidate`; after each step one
    :func:`~pcreg.registration.verdict.judge` over all of them decides, and the search stops
    at the first registered verdict (``exhaustive``: never; every reading and step runs, for
    the labelled verdict set).

    A pair whose extents differ by more than
    :data:`~pcreg.registration.inside.INSIDE_RATIO` (up to
    :data:`~pcreg.registration.checks.MAX_INSIDE_RATIO`) is an object in a scene
    (:func:`~pcreg.registration.inside.register_inside`) and only that; from
    :data:`~pcreg.registration.inside.INSIDE_FALLBACK_RATIO` on it is searched so too
    where the scene path does not register it, and from
    :data:`~pcreg.registration.inside.INSIDE_SMALL_RATIO` on where the scene path finds the
    smaller cloud too small for its voxel. Not with a named ``model``."""
    from pcreg.registration.checks import MAX_INSIDE_RATIO, TooFewPointsError
    from pcreg.registration.inside import (
        INSIDE_FALLBACK_RATIO,
        INSIDE_RATIO,
        INSIDE_SMALL_RATIO,
        inside_ratio,
        register_inside,
    )

    def searched_inside() -> RegistrationResult:
        found = register_inside(src, ref, names, origins, start, pipe.units)
        if pipe.strict and found.registered:  # one path only: nothing to cross-check with
            found.rejected = ("ambiguous under --strict: the object-in-scene search has no "
                              "independent second path to cross-check its pose with")  # fmt: skip
        return _add_up(found, start, time.perf_counter())  # its checks are its search's

    ratio = inside_ratio(src, ref)
    inside = pipe.model is None and not exhaustive and ratio <= MAX_INSIDE_RATIO
    if inside and ratio > INSIDE_RATIO:  # an object in a scene, and nothing else
        return searched_inside()
    # from twice smaller on, a cloud too small for the network is searched inside the other;
    # under that, the pair is read once more as a small object (_finer_reading)
    small_inside = inside and ratio > INSIDE_SMALL_RATIO
    try:
        result = _register_scene(
            pipe, src, ref, names, origins, start, exhaustive, finer=not small_inside
        )
    except TooFewPointsError:  # the small cloud vanishes at the scene's voxel; any other
        if not small_inside:  # refusal (memory cap, ...) stands
            raise
        return searched_inside()
    mirror = result.verdict is not None and result.verdict.reason.startswith("mirror:")
    if inside and ratio > INSIDE_FALLBACK_RATIO and not result.registered and not mirror:
        checked = result.timings["total"]  # the scene search's end, with its checks
        found = searched_inside()
        if found.registered:
            return found
        # the scene search's answer stands; the object-in-scene search was searching too
        inside_s = found.timings["total"] - checked
        result.timings["search"] += inside_s
        result.timings["total"] += inside_s
    return result


def _finer_reading(
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


def _add_up(result: RegistrationResult, start: float, searched: float) -> RegistrationResult:
    """``result``'s ``timings`` with ``search`` (from ``start`` to ``searched``, every reading
    and step), ``checks`` (from then to now: the checks of its answer) and ``total`` (their
    sum), beside the stages of the answer's own estimate (``register``, ``icp``, ``verify``,
    or the object-in-scene search's ``places``, ``poses``, ``verify``), which lie inside
    ``search`` (a newcomer summed them all and got a fifth of the total)."""
    end = time.perf_counter()
    result.timings.update(search=searched - start, checks=end - searched, total=end - start)
    return result


def _register_scene(
    pipe: Registration,
    src: np.ndarray,
    ref: np.ndarray,
    names: tuple[str, str],
    origins: np.ndarray,
    start: float,
    exhaustive: bool,
    finer: bool = True,
) -> RegistrationResult:
    """:func:`register_auto` for two scans of one scene (the module doc's readings and
    steps). ``finer``: where every reading was refused as too small for the network, read the
    pair once more as a small object (:func:`_finer_reading`); its refusal, if any, is not
    the one raised (the first reading's is)."""
    from pcreg.registration.checks import TooFewPointsError
    from pcreg.registration.verdict import (
        judge,
        load_verdict_model,
        reading_densities,
        scene_size,
    )

    model = load_verdict_model("auto")
    extent = max(cloud_extent(src), cloud_extent(ref))
    skipped: list[Reading] = []
    if pipe.model is not None:  # a named network: the user's units are its metres
        reads: Iterable[Reading] = [Reading("metres", pipe.model, 1.0)]
    elif pipe.units is not None:  # the user's unit: no other reading is tried
        reads = _dense_objects([reading_for(pipe.units, extent)], src, ref, extent, {})
    else:
        sparse: dict[tuple[str, float], int] = {}  # each reading's voxel count, once
        candidates = _dense_objects(readings(extent), src, ref, extent, sparse)
        # a list, not the generator: the readings it leaves out as sparse are known (and
        # reported in ``readings``) also where the search registers before the last one; the
        # voxel counts are made on its first step either way
        reads = (
            list(
                _by_sampling(candidates, src, ref, sparse, keep_sparse=exhaustive, skipped=skipped)
            )
            if candidates
            else [Reading("metres", "", 1.0)]
        )
    centre = src.mean(axis=0) + origins[0]  # the source's centre, input frame
    diagonal = scene_size(ref)
    errors: list[InputError] = []
    found: list[Candidate] = []
    tried: list[dict[str, object]] = []
    verdict = None
    step_index = -1

    def then_finer(reads: Iterable[Reading]) -> Iterator[Reading]:
        yield from reads
        if (
            finer and not found and errors and all(isinstance(e, TooFewPointsError) for e in errors)
        ):  # every reading refused as too small: once more as a small object
            again = _finer_reading(pipe, src, ref, tried)
            if again is not None:
                logger.info("units: too small for the network under every reading; read as "
                            "an object x%.4g", again.scale)  # fmt: skip
                yield again

    for rank, reading in enumerate(then_finer(reads)):
        scale = reading.scale
        try:
            plan = pipe.plan(src * scale, ref * scale, names, model=reading.model or None)
        except InputError as err:
            logger.info("units read as %s: %s", reading.units, err)
            errors.append(_in_given_units(err, src, ref, names, scale))
            tried.append({"units": reading.units, "object": reading.object, "scale": scale,
                          "model": reading.model or None, "refused": str(err)})  # fmt: skip
            continue
        density = reading_densities(src, ref, plan, scale)
        tried.append({"units": reading.units, "object": reading.object, "scale": scale,
                      "model": plan.model, "density": [round(d, 4) for d in density]})  # fmt: skip
        s, r, o = plan.clean(src * scale, ref * scale, origins * scale)
        order = OBJECT_STEPS if reading.object else SCENE_STEPS
        for step in order:
            step_index += 1
            new = steps.attempt(
                pipe,
                plan,
                step,
                s,
                r,
                o,
                scale,
                start,
                ransac_iterations=steps.ransac_iterations(plan, reading.object),
            )
            for cand in new:
                cand.step, cand.stage = step_index, step
                cand.result.units, cand.result.object = reading.units, reading.object
                cand.features.update(
                    object_reading=float(reading.object),
                    outdoor=float(plan.setting.name == "outdoor"),
                    reading_rank=float(rank),
                    density_min=min(density),
                    density_max=max(density),
                )
            found += new
            verdict = judge(found, model, centre, diagonal)
            if exhaustive or not verdict.registered:
                # an estimate not registered after its own step never is later (candidates
                # only add rivals): the mirror check will not need its search's work
                for cand in new:
                    cand.mirror = None
            for cand in new:
                logger.info(
                    "units %s (x%.4g), %s: score %.2f, confidence %.2f",
                    reading.units, scale, cand.path, cand.score, cand.result.confidence,
                )  # fmt: skip
            if verdict.registered and not exhaustive:
                break
        if verdict is not None and verdict.registered and not exhaustive:
            break
    searched = time.perf_counter()  # the search's end: the checks of its answer follow
    if verdict is None or verdict.best is None:
        if errors:
            raise errors[0]
        raise InputError(names[0], "no reading of the units gave an estimate")
    tried += [{"units": r.units, "object": r.object, "scale": r.scale,
               "refused": "not tried: the clouds are sparser than the network's voxel under "
               "this reading, and another reading is plausible (--units names it)"}
              for r in skipped]  # fmt: skip
    for entry in tried:  # each reading's best score
        scores = [c.score for c in found if c.result.scale == entry["scale"]]
        entry["best_score"] = round(max(scores), 4) if scores else None
    if verdict.registered and not exhaustive and len(tried) > 1:
        from pcreg.registration.scale_hold import finer_reading_check, room_reading_check

        finer_reading_check(verdict, found, src + origins[0], ref + origins[1])
        room_reading_check(verdict, found, src + origins[0], ref + origins[1])
    if verdict.registered and not exhaustive:
        _mirror_check(pipe, verdict, src, ref, names, origins, start)
    for cand in found:  # the searches' pyramids and networks: neither kept nor pickled
        cand.mirror = None
    if verdict.registered and pipe.strict:
        _strict(pipe, verdict, found, centre, diagonal, src, ref, names, origins, start)
    result = verdict.best.result
    result.verdict = verdict
    result.readings = tried
    return _add_up(result, start, searched)  # the checks: scale hold, mirror, --strict


def _in_given_units(
    err: InputError, src: np.ndarray, ref: np.ndarray, names: tuple[str, str], scale: float
) -> InputError:
    """A reading's refusal of the pair (clouds multiplied by ``scale``) with its numbers in
    the units the clouds were given in, where the same checks refuse them unscaled (the
    scales' ratio does not depend on the reading: a cloud in metres against one in
    millimetres was said to span 0.00395 and 4.02 under the millimetre reading)."""
    if scale == 1.0:
        return err
    try:
        check_pair(src, ref, names)
    except InputError as plain:
        return plain
    return err


def _mirror_check(pipe, verdict, src, ref, names, origins, start) -> None:
    """The mirror check (:func:`~pcreg.registration.mirror.mirror_check`): the source's
    mirror image searched by the step that made the best estimate, under its reading."""
    from pcreg.registration.mirror import mirror_check, mirrored

    def mirror_fits(best: Candidate) -> list[dict[str, float]]:
        if best.mirror is not None:  # the same search's work, reused
            return best.mirror()
        scale, image = best.result.scale, mirrored(src)
        plan = pipe.plan(image * scale, ref * scale, names, model=best.result.model)
        s, r, o = plan.clean(image * scale, ref * scale, origins * scale)
        step = best.stage
        cap = steps.ransac_iterations(plan, best.result.object)
        found = steps.attempt(
            pipe, plan, step, s, r, o, scale, start, light=True, ransac_iterations=cap
        )
        return [c.features for c in found]

    mirror_check(verdict, mirror_fits)


def _strict(pipe, verdict, found, centre, diagonal, src, ref, names, origins, start) -> None:
    """``--strict``: the registered estimate stands only where the other, independent path
    (the network's search vs FPFH + RANSAC alone) reached the same pose (not
    :func:`~pcreg.registration.verdict.different`); else the verdict turns to not registered."""
    from pcreg.registration.verdict import different, load_verdict_model

    best = verdict.best
    # FPFH + RANSAC's pose refined by the network is not independent of FPFH + RANSAC
    other = "geotransformer" if best.path.startswith("fpfh-ransac") else "fpfh-ransac"
    pool = [c for c in found if c.path == other and c.result.scale == best.result.scale]
    if not pool:
        scale = best.result.scale
        plan = pipe.plan(src * scale, ref * scale, names, model=best.result.model)
        s, r, o = plan.clean(src * scale, ref * scale, origins * scale)
        step = "classical" if other == "fpfh-ransac" else "learned"
        cap = steps.ransac_iterations(plan, best.result.object)
        found = steps.attempt(pipe, plan, step, s, r, o, scale, start, ransac_iterations=cap)
        pool = [c for c in found if c.path == other]
        model = load_verdict_model("auto")
        for c in pool:
            c.features.update({k: v for k, v in best.features.items() if k not in c.features})
            c.score = model.score(c.features)
    agree = [c for c in pool if not different(c.transform, best.transform, centre, diagonal)]
    if agree:
        return
    verdict.registered = False
    if not pool:
        verdict.reason = f"--strict: {other} gave no estimate to cross-check {best.path}'s with"
        return
    verdict.rival = max(pool, key=lambda c: c.score)
    verdict.rival_transform = verdict.rival.transform
    verdict.reason = (
        f"ambiguous: {best.path} and the independent {other} reached different poses (--strict)"
    )


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


def _dense_objects(
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


def _by_sampling(
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
    already counted in ``sparse`` (:func:`_dense_objects`)."""
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
