"""One step of ``auto``'s search (:mod:`pcreg.registration.auto`) on a scaled, cleaned pair,
and its finished estimates as verdict candidates:

* ``learned``: the network under its orientation search;
* ``classical`` (and ``object``, ``classical, coarser`` for objects): Open3D FPFH + RANSAC
  proposes a pose, the network runs again from it (:func:`from_pose`; where that pass runs
  only the source's half, the ICP of FPFH's pose runs beside it: :func:`beside`), and both
  estimates are finished.

The mirror check and ``--strict`` (in :mod:`~pcreg.registration.auto`) run these steps again
on the mirror image or for the other path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    from pcreg.registration.verdict import Candidate

# ``pipe`` is a :class:`~pcreg.registration.pipeline.Registration` and ``plan`` its ``_Plan``
# (typed Any: the pipeline imports :mod:`pcreg.registration.auto`, which imports this module)
Registration = Any
_Plan = Any

__all__ = ["MIRROR_HYPOTHESES", "MIRROR_ICP_ITERATIONS", "ROOM_RANSAC_ITERATIONS", "attempt",
           "beside", "from_pose", "mirror_features", "ransac_iterations"]  # fmt: skip

T = TypeVar("T")
U = TypeVar("U")

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

#: the mirror check's learned estimate runs the mirror image's best-ranked orientation
#: hypotheses only (the main search runs up to 9 on a 3DMatch pair)
MIRROR_HYPOTHESES = 2
#: and its ICP stops after this many iterations (the pipeline's cap is 100; a mirror image
#: that fits converges from the network's estimate in a few, one that does not runs to the cap)
MIRROR_ICP_ITERATIONS = 20


def attempt(
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
    (:func:`ransac_iterations`)."""
    finish = pipe._finish
    if light:
        finish = partial(pipe._finish, probe=False, icp_iterations=MIRROR_ICP_ITERATIONS)
    from pcreg.registration.finish import refine
    from pcreg.registration.verdict import Candidate, candidate_features, hypothesis_margin

    if step.startswith("learned"):  # the network under its orientation search
        t0 = time.perf_counter()
        # on objects only where a hypothesis source applies (a small Manhattan room)
        found = plan.search(pipe.search_for(plan.loaded), src, ref, as_given=step == "learned")
        if found is None:
            return []
        margin = hypothesis_margin(found, src, ref)
        result = pipe._learned(plan, found.prediction, found.hypothesis)
        result.timings["register"] = time.perf_counter() - t0
        result.method_used = "geotransformer"
        result = finish(result, plan, src, ref, start, origins, scale)
        cand = Candidate(result, candidate_features(result, margin, fpfh=False))
        if found.mirror is not None:
            cand.mirror = partial(mirror_features, pipe, plan, found.mirror, src, ref, origins,
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
        icp = None  # beside the pass only where it runs the source's half alone, on one core
        if pipe.icp and not light and knows is not None and knows(cut[1]):
            icp = partial(refine, pose, plan, src, ref)
        (net, net_time), (icp_done, icp_seconds) = beside(partial(from_pose, plan, cut, pose), icp)
    out = []
    support = None if net is None else (net.src_corr_points, net.ref_corr_points, net.corr_scores)
    finished = finish(classical, plan, src, ref, start, origins, scale, support=support,
                      refined=icp_done, refined_seconds=icp_seconds)  # fmt: skip
    out.append(Candidate(finished, candidate_features(finished, 0.0, fpfh=True, alone=True)))
    if net is not None:
        posed = pipe._learned(plan, net, "fpfh-ransac")
        posed.timings["register"] = net_time
        posed.method_used = "fpfh-ransac+geotransformer"
        posed = finish(posed, plan, src, ref, start, origins, scale)
        out.append(Candidate(posed, candidate_features(posed, 0.0, fpfh=True)))
    if step != "classical":  # objects: the network must confirm FPFH's pose (none: nothing)
        out = out[1:]
    return out


def ransac_iterations(plan: _Plan, obj: bool) -> int:
    """FPFH + RANSAC's iteration cap for a step under this reading:
    :data:`ROOM_RANSAC_ITERATIONS` for a room (the ``indoor`` setting, not read as an object),
    Open3D's 100,000 for objects and streets."""
    return ROOM_RANSAC_ITERATIONS if plan.setting.name == "indoor" and not obj else 100_000


def beside(
    first: Callable[[], T], second: Callable[[], U] | None
) -> tuple[tuple[T, float], tuple[U | None, float]]:
    """``first()``, and ``second()`` beside it on a worker thread where the registration runs two
    lanes (:func:`~pcreg.engine.threads.current_lanes`), else after it; ``second`` runs in
    this registration's context (its memo, :mod:`pcreg.registration.memo`), and every BLAS
    stays at one thread meanwhile (the network's steps set that limit process-wide as they
    enter and leave).
    Returns ``(value, seconds)`` of each (``(None, 0.0)`` without ``second``).

    The network's pass from FPFH + RANSAC's pose and the ICP of that pose are independent.
    The caller pairs them only where the pass runs the source's half alone (its reference's
    half was the first pass's: :meth:`~pcreg.registration.onnx_network.OnnxRegistrar.knows`),
    on one core: on two KITTI highway scans the pass takes about 0.9 s and ICP 0.6 s of the
    other (a wrong pose slides for all 100 steps)."""
    from concurrent.futures import ThreadPoolExecutor
    from contextvars import copy_context

    from threadpoolctl import threadpool_limits

    from pcreg.engine.threads import current_lanes

    def timed(func: Callable[[], T]) -> tuple[T, float]:
        t0 = time.perf_counter()
        out = func()
        return out, time.perf_counter() - t0

    if second is None:
        return timed(first), (None, 0.0)
    if current_lanes() < 2:
        return timed(first), timed(second)
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(1) as pool:
        later = pool.submit(copy_context().run, timed, second)
        return timed(first), later.result()


def mirror_features(pipe, plan, mirror, src, ref, origins, scale, start) -> list[dict[str, float]]:
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


def from_pose(plan: _Plan, cut: tuple[np.ndarray, np.ndarray], pose: np.ndarray):
    """The network's prediction for the pair ``cut`` (what the network is given of it:
    :meth:`~pcreg.registration.pipeline._Plan.for_network`), run on the source moved by
    ``pose`` (4, 4): its transform composed with the pose, its source points moved back."""
    from pcreg.registration.prediction import Prediction

    src, ref = cut  # cut about the source's own centre (and scaled, as given), then moved
    moved = src @ pose[:3, :3].T + pose[:3, 3] * plan.network_scale
    pred = plan.network_pass(moved, ref)  # in the pair's units
    back = (pred.src_corr_points - pose[:3, 3]) @ pose[:3, :3]
    return Prediction(pred.transform @ pose, back, pred.ref_corr_points, pred.corr_scores,
                      pred.time_s)  # fmt: skip
