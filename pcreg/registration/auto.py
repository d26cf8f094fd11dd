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

Every finished estimate is a :class:`~pcreg.registration.verdict.Candidate`. After each step
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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from pcreg.errors import InputError
from pcreg.registration.checks import cloud_extent
from pcreg.registration.result import RegistrationResult
from pcreg.registration.scale import OBJECT_EXTENT, Reading, reading_for, readings

if TYPE_CHECKING:
    from pcreg.registration.verdict import Candidate

# ``pipe`` is a :class:`~pcreg.registration.pipeline.Registration` and ``plan`` its ``_Plan``:
# typed Any here because the pipeline imports this module (no import cycle)
Registration = Any
_Plan = Any

__all__ = ["register_auto"]

T = TypeVar("T")
U = TypeVar("U")

logger = logging.getLogger(__name__)

#: the steps for rooms and streets, and for objects (module doc). On objects only the
#: network's estimate from FPFH's pose counts: on the zero-shot bunny and dragon draws FPFH +
#: RANSAC + ICP alone added 2 successes and 1 wrong registration; the second FPFH runs at
#: 1.5x the voxel (other features, other hypotheses).
SCENE_STEPS = ("learned", "classical")
OBJECT_STEPS = ("learned, where a source applies", "object", "classical, coarser")

#: RANSAC's iteration cap in the ``classical`` step of rooms (the ``indoor`` setting read as a
#: scene). A pair with no rigid answer runs to the cap, and that is where a room's time went: a
#: mirrored 3DMatch fragment against itself spent 2.5 s in RANSAC at Open3D's 100,000
#: iterations, 0.59 s at 20,000. On 248 cases of 12 generated rooms never used in any fit
#: (seeds 3,000,700-711, every class of the verdict set; ``pcreg.bench.verdict_set``), the
#: default registration with 100,000 / 20,000: right and registered 78 / 80, wrong but
#: registered 27 / 26, median 0.54 / 0.47 s, 90th percentile 1.35 / 1.16 s; the zero-shot
#: 3DMatch and TUM draws the same. Objects and streets keep 100,000: at 20,000 the zero-shot
#: bunny and dragon draws lost 6 of 167 successes, and KITTI training pair 01 0 -> 9 (a
#: highway, 8.9 m) was refused 9.4 deg off (a street's RANSAC time goes into matching the
#: features, not into the iterations: ``Setting.classical_queries``).
ROOM_RANSAC_ITERATIONS = 20_000


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
        return found

    ratio = inside_ratio(src, ref)
    inside = pipe.model is None and not exhaustive and ratio <= MAX_INSIDE_RATIO
    if inside and ratio > INSIDE_RATIO:  # an object in a scene, and nothing else
        return searched_inside()
    try:
        result = _register_scene(pipe, src, ref, names, origins, start, exhaustive)
    except TooFewPointsError:  # the small cloud vanishes at the scene's voxel; any other
        if not (inside and ratio > INSIDE_SMALL_RATIO):  # refusal (memory cap, ...) stands
            raise
        return searched_inside()
    mirror = result.verdict is not None and result.verdict.reason.startswith("mirror:")
    if inside and ratio > INSIDE_FALLBACK_RATIO and not result.registered and not mirror:
        found = searched_inside()
        if found.registered:
            return found
    return result


def _register_scene(
    pipe: Registration,
    src: np.ndarray,
    ref: np.ndarray,
    names: tuple[str, str],
    origins: np.ndarray,
    start: float,
    exhaustive: bool,
) -> RegistrationResult:
    """:func:`register_auto` for two scans of one scene (the module doc's readings and
    steps)."""
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
        sparse: dict[tuple[str, float], bool] = {}  # each reading's voxel count, once
        candidates = _dense_objects(readings(extent), src, ref, extent, sparse)
        reads = (
            _by_sampling(candidates, src, ref, sparse, keep_sparse=exhaustive, skipped=skipped)
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
    for rank, reading in enumerate(reads):
        scale = reading.scale
        try:
            plan = pipe.plan(src * scale, ref * scale, names, model=reading.model or None)
        except InputError as err:
            logger.info("units read as %s: %s", reading.units, err)
            errors.append(err)
            tried.append({"units": reading.units, "object": reading.object, "scale": scale,
                          "refused": str(err)})  # fmt: skip
            continue
        density = reading_densities(src, ref, plan, scale)
        tried.append({"units": reading.units, "object": reading.object, "scale": scale,
                      "model": plan.model, "density": [round(d, 4) for d in density]})  # fmt: skip
        s, r, o = plan.clean(src * scale, ref * scale, origins * scale)
        steps = OBJECT_STEPS if reading.object else SCENE_STEPS
        for step in steps:
            step_index += 1
            new = _attempt(
                pipe,
                plan,
                step,
                s,
                r,
                o,
                scale,
                start,
                ransac_iterations=_ransac_iterations(plan, reading.object),
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
    if verdict.registered and not exhaustive:
        _mirror_check(pipe, verdict, src, ref, names, origins, start)
    for cand in found:  # the searches' pyramids and networks: neither kept nor pickled
        cand.mirror = None
    if verdict.registered and pipe.strict:
        _strict(pipe, verdict, found, centre, diagonal, src, ref, names, origins, start)
    result = verdict.best.result
    result.verdict = verdict
    result.readings = tried
    result.timings["total"] = time.perf_counter() - start  # the checks after the estimate too
    return result


#: the mirror check's learned estimate runs the mirror image's best-ranked orientation
#: hypotheses only (the main search runs up to 9 on a 3DMatch pair)
MIRROR_HYPOTHESES = 2
#: and its ICP stops after this many iterations (the pipeline's cap is 100; a mirror image
#: that fits converges from the network's estimate in a few, one that does not runs to the cap)
MIRROR_ICP_ITERATIONS = 20


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
        cap = _ransac_iterations(plan, best.result.object)
        found = _attempt(pipe, plan, step, s, r, o, scale, start, light=True, ransac_iterations=cap)
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
        cap = _ransac_iterations(plan, best.result.object)
        found = _attempt(pipe, plan, step, s, r, o, scale, start, ransac_iterations=cap)
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


def _sparse(
    reading: Reading, src: np.ndarray, ref: np.ndarray, seen: dict[tuple[str, float], bool]
) -> bool:
    """Whether the smaller cloud of a pair barely thins at ``reading``'s network voxel
    (occupied voxels over points above :data:`SPARSE_READING`); one voxel count per model
    and scale, kept in ``seen`` (the pair's)."""
    from pcreg.registration.checks import voxel_count
    from pcreg.registration.resources import SHIPPED_FOOTPRINTS

    key = (reading.model, reading.scale)
    if key not in seen:
        voxel = SHIPPED_FOOTPRINTS[reading.model].voxel / reading.scale  # in the input's unit
        cloud = src if len(src) <= len(ref) else ref
        seen[key] = voxel_count(cloud, voxel) > SPARSE_READING * len(cloud)
    return seen[key]


def _dense_objects(
    reads: list[Reading],
    src: np.ndarray,
    ref: np.ndarray,
    extent: float,
    sparse: dict[tuple[str, float], bool],
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
    and 300 superpoints. One voxel count per such reading, none on any other path."""
    out: list[Reading] = []
    for reading in reads:
        scale = OBJECT_EXTENT / extent
        if reading.object and reading.scale != scale and _sparse(reading, src, ref, sparse):
            logger.info("units: an object read x%.4g, not x%.4g: its points are sparser than "
                        "the network's voxel at x%.4g (not a room scaled down)",
                        scale, reading.scale, reading.scale)  # fmt: skip
            reading = replace(reading, scale=scale)
        if all(r.model != reading.model or r.scale != reading.scale for r in out):
            out.append(reading)
    return out


def _by_sampling(
    reads: list[Reading],
    src: np.ndarray,
    ref: np.ndarray,
    sparse: dict[tuple[str, float], bool],
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


def _attempt(
    pipe: Registration,
    plan: _Plan,
    step: str,
    src: np.ndarray,
    ref: np.ndarray,
    origins: np.ndarray,
    scale: float,
    start: float,
    light: bool = False,
    ransac_iterations: int = 100_000,
) -> list[Candidate]:
    """One step of the module doc on the scaled, cleaned pair: its finished estimates as
    candidates, in the user's frame (none: the step does not apply). ``light``: only the fit
    is wanted (the mirror check): no symmetry probe, ICP capped at
    :data:`MIRROR_ICP_ITERATIONS`. ``ransac_iterations``: FPFH + RANSAC's cap
    (:func:`_ransac_iterations`)."""
    finish = pipe._finish
    if light:
        finish = partial(pipe._finish, probe=False, icp_iterations=MIRROR_ICP_ITERATIONS)
    from pcreg.registration.finish import refine
    from pcreg.registration.verdict import Candidate, candidate_features, hypothesis_margin

    if step.startswith("learned"):  # the network under its orientation search
        t0 = time.perf_counter()
        # on objects only where a hypothesis source applies (a small Manhattan room)
        found = pipe.search_for(plan.loaded)(
            *plan.for_network(src, ref), as_given=step == "learned"
        )
        if found is None:
            return []
        margin = hypothesis_margin(found, src, ref)
        result = pipe._learned(plan, found.prediction, found.hypothesis)
        result.timings["register"] = time.perf_counter() - t0
        result.method_used = "geotransformer"
        result = finish(result, plan, src, ref, start, origins, scale)
        cand = Candidate(result, candidate_features(result, margin, fpfh=False))
        if found.mirror is not None:
            cand.mirror = partial(_mirror_features, pipe, plan, found.mirror, src, ref, origins,
                                  scale, start)  # fmt: skip
        return [cand]
    t0 = time.perf_counter()
    coarse = step == "classical, coarser"  # other features: 1.5x the voxel for FPFH
    classical = pipe._classical(
        replace(plan, voxel=plan.voxel * 1.5) if coarse else plan,
        src,
        ref,
        plan.setting.classical_queries,
        ransac_iterations,
    )
    classical.voxel_size = plan.voxel
    classical.timings["register"] = time.perf_counter() - t0
    classical.method_used = "fpfh-ransac"
    pose = classical.transform.copy()
    net = None  # the network's prediction from FPFH's pose: its correspondences judge both
    icp_done, icp_seconds = None, 0.0  # ICP of FPFH's pose, where it ran beside the network
    if len(classical.src_corr_points) >= 3:
        cut = plan.for_network(src, ref)
        knows = getattr(plan.loaded.network, "knows", None)
        beside = None  # only where the pass will run the source's half alone, on one core
        if pipe.icp and not light and knows is not None and knows(cut[1]):
            beside = partial(refine, pose, plan, src, ref)
        (net, net_time), (icp_done, icp_seconds) = _beside(
            partial(_from_pose, plan, cut, pose), beside
        )
    out = []
    support = None if net is None else (net.src_corr_points, net.ref_corr_points, net.corr_scores)
    finished = finish(classical, plan, src, ref, start, origins, scale, support=support,
                      refined=icp_done, refined_seconds=icp_seconds)  # fmt: skip
    out.append(Candidate(finished, candidate_features(finished, 0.0, fpfh=True, alone=True)))
    if net is not None:
        from_pose = pipe._learned(plan, net, "fpfh-ransac")
        from_pose.timings["register"] = net_time
        from_pose.method_used = "fpfh-ransac+geotransformer"
        from_pose = finish(from_pose, plan, src, ref, start, origins, scale)
        out.append(Candidate(from_pose, candidate_features(from_pose, 0.0, fpfh=True)))
    if step != "classical":  # objects: the network must confirm FPFH's pose (none: nothing)
        out = out[1:]
    return out


def _ransac_iterations(plan: _Plan, obj: bool) -> int:
    """FPFH + RANSAC's iteration cap for a step under this reading:
    :data:`ROOM_RANSAC_ITERATIONS` for a room (the ``indoor`` setting, not read as an object),
    Open3D's 100,000 for objects and streets."""
    return ROOM_RANSAC_ITERATIONS if plan.setting.name == "indoor" and not obj else 100_000


def _beside(
    first: Callable[[], T], second: Callable[[], U] | None
) -> tuple[tuple[T, float], tuple[U | None, float]]:
    """``first()``, and ``second()`` beside it on a worker thread where two cores are free
    (:func:`~pcreg.engine.threads.current_threads`), else after it; ``second`` runs in this
    registration's context (its memo, :mod:`pcreg.registration.memo`), and every BLAS stays
    at one thread meanwhile (the network's steps set that limit process-wide as they enter
    and leave). Returns ``(value, seconds)`` of each (``(None, 0.0)`` without ``second``).

    The network's pass from FPFH + RANSAC's pose and the ICP of that pose are independent.
    The caller pairs them only where the pass runs the source's half alone (its reference's
    half was the first pass's: :meth:`~pcreg.registration.onnx_network.OnnxRegistrar.knows`),
    on one core: on two KITTI highway scans the pass takes about 0.9 s and ICP 0.6 s of the
    other (a wrong pose slides for all 100 steps)."""
    from concurrent.futures import ThreadPoolExecutor
    from contextvars import copy_context

    from threadpoolctl import threadpool_limits

    from pcreg.engine.threads import current_threads

    def timed(func: Callable[[], T]) -> tuple[T, float]:
        t0 = time.perf_counter()
        out = func()
        return out, time.perf_counter() - t0

    if second is None:
        return timed(first), (None, 0.0)
    if current_threads() < 2:
        return timed(first), timed(second)
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(1) as pool:
        later = pool.submit(copy_context().run, timed, second)
        return timed(first), later.result()


def _mirror_features(pipe, plan, mirror, src, ref, origins, scale, start) -> list[dict[str, float]]:
    """The measurements of the network's estimate for the mirror image of ``src`` onto
    ``ref`` (``mirror``: the search's :attr:`~pcreg.registration.search.SearchResult.mirror`,
    run on the :data:`MIRROR_HYPOTHESES` best-ranked hypotheses), polished by ICP and
    verified like any estimate, without the symmetry probe; none where the search's ranking
    screened the mirror image out (:data:`~pcreg.registration.mirror.MIRROR_RANK_RATIO`)."""
    from pcreg.registration.mirror import mirrored
    from pcreg.registration.verdict import candidate_features

    found = mirror(MIRROR_HYPOTHESES)
    if found is None:  # the ranking screened it out (pcreg.registration.mirror)
        return []
    result = pipe._learned(plan, found, "mirror")
    result.method_used = "geotransformer"
    result = pipe._finish(result, plan, mirrored(src), ref, start, origins, scale, probe=False,
                          icp_iterations=MIRROR_ICP_ITERATIONS)  # fmt: skip
    return [candidate_features(result, 0.0, fpfh=False)]


def _from_pose(plan: _Plan, cut: tuple[np.ndarray, np.ndarray], pose: np.ndarray):
    """The network's prediction for the pair ``cut`` (what the network is given of it:
    :meth:`~pcreg.registration.pipeline._Plan.for_network`), run on the source moved by
    ``pose`` (4, 4): its transform composed with the pose, its source points moved back."""
    from pcreg.registration.prediction import Prediction

    src, ref = cut  # cut about the source's own centre, then moved
    moved = src @ pose[:3, :3].T + pose[:3, 3]
    pred = plan.loaded.network(moved, ref)
    back = (pred.src_corr_points - pose[:3, 3]) @ pose[:3, :3]
    return Prediction(pred.transform @ pose, back, pred.ref_corr_points, pred.corr_scores,
                      pred.time_s)  # fmt: skip
