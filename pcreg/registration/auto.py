"""``method="auto"``, the default: the learned path wherever it registers, any unit, any scan.

For each reading of the pair's unit (:mod:`pcreg.registration.scale`, most plausible first) the
pair is scaled to the metres its network was trained at, then estimated until the verifier
(:mod:`pcreg.registration.verify`) accepts an estimate:

1. **learned**: the network under its orientation search (Manhattan cube hypotheses for
   ``indoor``, the identity for the rotation-invariant ``outdoor``);
2. **classical + learned**: Open3D FPFH + RANSAC proposes a pose (a hypothesis source that
   needs no Manhattan structure and no upright scan), and the network is run again from it;
   the better-supported of the two verified estimates wins, the network's on a tie.

Objects (a pair under 1 m in its unit) run step 1 only where a hypothesis source applies (a
small Manhattan room does; a bunny has no Manhattan axes), then step 2, where only the
network's estimate counts; when it does not verify, FPFH runs again at 1.5x the voxel. The
first estimate the verifier accepts is returned; where none is, the best-supported one is,
with ``registered`` false and the verifier's reason. The result says which path produced it
(``method_used``) and which reading of the units (``units``, ``scale``).

``strict``: a registered estimate must also agree with the other path's (learned vs
classical) where that one registers too: two verified estimates more than
:data:`AGREE_DEG` or :data:`AGREE_VOXELS` voxels apart make the pair ambiguous, and it is not
registered.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from pcreg.errors import InputError
from pcreg.registration.checks import cloud_extent
from pcreg.registration.result import RegistrationResult
from pcreg.registration.scale import Reading, readings

# ``pipe`` is a :class:`~pcreg.registration.pipeline.Registration` and ``plan`` its ``_Plan``:
# typed Any here because the pipeline imports this module (no import cycle)
Registration = Any
_Plan = Any

__all__ = ["AGREE_DEG", "AGREE_VOXELS", "register_auto"]

logger = logging.getLogger(__name__)

#: two verified estimates further apart than this (degrees, or voxels of translation) disagree
AGREE_DEG = 5.0
AGREE_VOXELS = 3.0
#: the network's estimate from the classical pose wins unless its support is this much lower
_LEARNED_TIE = 0.98
#: the steps for rooms and streets, and for objects (module doc). On objects only the
#: network's estimate from FPFH's pose counts: on the zero-shot bunny and dragon draws FPFH +
#: RANSAC + ICP alone added 2 successes and 1 wrong registration; when it does not verify,
#: FPFH runs again at 1.5x the voxel (other features, other hypotheses).
SCENE_STEPS = ("learned", "classical")
OBJECT_STEPS = ("learned, where a source applies", "object", "classical, coarser")


def register_auto(
    pipe: Registration,
    src: np.ndarray,
    ref: np.ndarray,
    names: tuple[str, str],
    origins: np.ndarray,
    start: float,
) -> RegistrationResult:
    """Register a pair already in its working frame (``src``, ``ref`` shifted by
    ``origins (2, 3)``, float64) with ``pipe``'s settings; see the module doc."""
    extent = max(cloud_extent(src), cloud_extent(ref))
    if pipe.model is not None:  # a named network: the user's units are its metres
        reads = [Reading("metres", pipe.model, 1.0)]
    else:
        candidates = readings(extent)
        reads = _by_sampling(candidates, src, ref) if candidates else [Reading("metres", "", 1.0)]
    errors: list[InputError] = []
    best: RegistrationResult | None = None
    for reading in reads:
        scale = reading.scale
        try:
            plan = pipe.plan(src * scale, ref * scale, names, model=reading.model or None)
        except InputError as err:
            logger.info("units read as %s: %s", reading.units, err)
            errors.append(err)
            continue
        s, r, o = plan.clean(src * scale, ref * scale, origins * scale)
        steps = OBJECT_STEPS if reading.units == "object" else SCENE_STEPS
        for step in steps:
            result = _attempt(pipe, plan, step, s, r, o, scale, start)
            if result is None:
                continue
            result.units = reading.units
            logger.info(
                "units %s (x%.4g), %s: %s, confidence %.2f",
                reading.units, scale, result.method_used,
                "registered" if result.registered else result.reason, result.confidence,
            )  # fmt: skip
            if result.registered:
                if pipe.strict:
                    other = "classical" if step.startswith("learned") else "learned"
                    check = _attempt(pipe, plan, other, s, r, o, scale, start)
                    if check is not None:
                        _cross_check(result, check)
                return result
            if best is None or _support(result) > _support(best):
                best = result
    if best is None:
        raise errors[0]
    return best


#: a reading under which the clouds barely thin at the network's voxel (occupied voxels over
#: points above this) is tried last: its unit is most likely wrong. Measured: KITTI scans in
#: metres 0.17 at 0.3 m, 3DMatch fragments 0.2-0.4 at 5 cm, the Stanford bunny in millimetres
#: read as metres 1.0 (its 0.5 mm spacing becomes 0.5 m, sparser than any LiDAR scan).
SPARSE_READING = 0.9


def _by_sampling(reads: list[Reading], src: np.ndarray, ref: np.ndarray) -> Iterator[Reading]:
    """``reads`` with those under which the clouds are sparser than their network's voxel
    moved to the end (stable otherwise). Lazy: a reading is checked when the one before it
    did not register, so the common first-reading success counts voxels once (a KITTI scan:
    ~8 ms a count)."""
    from pcreg.registration.checks import voxel_count
    from pcreg.registration.resources import SHIPPED_FOOTPRINTS

    def sparse(reading: Reading) -> bool:
        voxel = SHIPPED_FOOTPRINTS[reading.model].voxel / reading.scale  # in the input's unit
        cloud = src if len(src) <= len(ref) else ref
        return voxel_count(cloud, voxel) > SPARSE_READING * len(cloud)

    if len(reads) < 2:  # nothing to reorder: no voxel count on the common path
        yield from reads
        return
    deferred = []
    for reading in reads:
        if sparse(reading):
            deferred.append(reading)
        else:
            yield reading
    yield from deferred


def _support(result: RegistrationResult) -> float:
    return result.confidence * result.fitness


def _attempt(
    pipe: Registration,
    plan: _Plan,
    step: str,
    src: np.ndarray,
    ref: np.ndarray,
    origins: np.ndarray,
    scale: float,
    start: float,
) -> RegistrationResult | None:
    """One step of the module doc on the scaled, cleaned pair, verified, in the user's
    frame (None: the step does not apply)."""
    if step.startswith("learned"):  # the network under its orientation search
        t0 = time.perf_counter()
        # on objects only where a hypothesis source applies (a small Manhattan room)
        found = pipe.search_for(plan.loaded)(src, ref, as_given=step == "learned")
        if found is None:
            return None
        result = pipe._learned(plan, found.prediction, found.hypothesis)
        result.timings["register"] = time.perf_counter() - t0
        result.method_used = "geotransformer"
        return pipe._finish(result, plan, src, ref, start, origins, scale)
    t0 = time.perf_counter()
    coarse = step == "classical, coarser"  # other features: 1.5x the voxel for FPFH
    classical = pipe._classical(replace(plan, voxel=plan.voxel * 1.5) if coarse else plan, src, ref)
    classical.voxel_size = plan.voxel
    classical.timings["register"] = time.perf_counter() - t0
    classical.method_used = "fpfh-ransac"
    pose = classical.transform.copy()
    finished = [pipe._finish(classical, plan, src, ref, start, origins, scale)]
    if len(classical.src_corr_points) >= 3:
        t0 = time.perf_counter()
        refined = pipe._learned(plan, _from_pose(plan, src, ref, pose), "fpfh-ransac")
        refined.timings["register"] = time.perf_counter() - t0
        refined.method_used = "fpfh-ransac+geotransformer"
        finished.append(pipe._finish(refined, plan, src, ref, start, origins, scale))
    learned = [r for r in finished if r.method == "geotransformer"]
    if step != "classical" and learned:  # objects: the network must confirm FPFH's pose
        finished = learned
    registered = [r for r in finished if r.registered] or finished
    learned = [r for r in registered if r.method == "geotransformer"]
    top = max(registered, key=_support)
    if learned and _support(learned[0]) >= _LEARNED_TIE * _support(top):
        return learned[0]
    return top


def _from_pose(plan: _Plan, src: np.ndarray, ref: np.ndarray, pose: np.ndarray):
    """The network's prediction for ``(src, ref)``, run on the source moved by ``pose``
    (4, 4): its transform composed with the pose, its source points moved back."""
    from pcreg.registration.network import Prediction

    moved = src @ pose[:3, :3].T + pose[:3, 3]
    pred = plan.loaded.network(moved, ref)
    back = (pred.src_corr_points - pose[:3, 3]) @ pose[:3, :3]
    return Prediction(pred.transform @ pose, back, pred.ref_corr_points, pred.corr_scores,
                      pred.time_s)  # fmt: skip


def _cross_check(result: RegistrationResult, other: RegistrationResult) -> None:
    """Mark ``result`` ambiguous when ``other`` registered a different transform."""
    if not other.registered:
        return
    a, b = result.transform, other.transform
    cos = (np.trace(a[:3, :3].T @ b[:3, :3]) - 1) / 2
    deg = float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))
    probe = np.asarray(result.src_corr_points, np.float64).reshape(-1, 3).mean(axis=0)
    shift = float(np.linalg.norm((a[:3, :3] - b[:3, :3]) @ probe + a[:3, 3] - b[:3, 3]))
    if deg > AGREE_DEG or shift > AGREE_VOXELS * result.voxel_size:
        result.rejected = (
            f"ambiguous: {result.method_used} and {other.method_used} registered transforms "
            f"{deg:.1f} deg and {shift:.3g} apart (--strict)"
        )
