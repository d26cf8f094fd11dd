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
from typing import TYPE_CHECKING, Any

import numpy as np

from pcreg.errors import InputError
from pcreg.registration import steps
from pcreg.registration.checks import check_pair, cloud_extent
from pcreg.registration.reading_choice import by_sampling, dense_objects, finer_reading
from pcreg.registration.result import RegistrationResult
from pcreg.registration.scale import Reading, reading_for, readings

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
    # under that, the pair is read once more as a small object (finer_reading)
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
    pair once more as a small object (:func:`finer_reading`); its refusal, if any, is not
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
        reads = dense_objects([reading_for(pipe.units, extent)], src, ref, extent, {})
    else:
        sparse: dict[tuple[str, float], int] = {}  # each reading's voxel count, once
        candidates = dense_objects(readings(extent), src, ref, extent, sparse)
        # a list, not the generator: the readings it leaves out as sparse are known (and
        # reported in ``readings``) also where the search registers before the last one; the
        # voxel counts are made on its first step either way
        reads = (
            list(by_sampling(candidates, src, ref, sparse, keep_sparse=exhaustive, skipped=skipped))
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
            again = finer_reading(pipe, src, ref, tried)
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
