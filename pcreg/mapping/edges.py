"""The edges of a map's pose graph: one registration per candidate pair, its verdict and its
6x6 information matrix.

An edge ``(src, ref)`` holds the pipeline's ``T_ref_src`` (``ref ≈ R @ src + t``), in the
input's units, as Open3D's pose graph takes it: ``PoseGraphEdge(src, ref, T_ref_src, ...)``
constrains ``T_ref_src ≈ inv(P_ref) @ P_src`` for the node poses ``P = T_world_scan``.

The information matrix of an edge is :func:`pcreg.registration.information.information_matrix`'s
(rotation then translation, in the source frame: the one Open3D's pose graph linearises in).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from pcreg.errors import InputError
from pcreg.registration.information import information_matrix

__all__ = ["Edge", "register_edges"]

logger = logging.getLogger(__name__)


@dataclass
class Edge:
    """One candidate pair of a map and what became of it.

    Attributes:
        src, ref: indices of the scans (input order); the edge measures ``T_ref_src``.
        kind: why it is a candidate: ``"sequence"`` (consecutive scans), ``"loop"`` (a loop
            closure candidate of a sequence) or ``"pair"`` (a pair of an unordered set).
        transform: ``(4, 4) float64`` ``T_ref_src`` in the input's units (the pipeline's
            estimate, also where it did not register).
        registered: the pipeline's verdict; ``reason`` why not (``""`` when registered).
        confidence, fitness: the verifier's contrast and overlap (0-1).
        information: ``(6, 6) float64`` (rotation then translation, source frame; zeros
            where not registered): see the module docstring.
        voxel: the ICP voxel of the registration, input units; the graph's tolerances are
            in these.
        time_s: seconds of the registration.
        units: the unit the pipeline read the pair in (``"metres"``, ``"millimetres"``, ...).
        kept: whether the pose graph kept the edge (set by :mod:`pcreg.mapping.graph`);
            ``rejected``: why not (``""`` when kept).
        residual_deg, residual: the rotation (deg) and RMS point displacement (input units)
            between the edge and the optimised poses (NaN where a scan is unplaced).
        model: the weights the pipeline used (``""`` where there is no result).
    """

    src: int
    ref: int
    kind: str
    transform: np.ndarray
    registered: bool
    reason: str = ""
    confidence: float = 0.0
    fitness: float = 0.0
    information: np.ndarray = field(default_factory=lambda: np.zeros((6, 6)))
    voxel: float = float("nan")
    time_s: float = 0.0
    units: str = "metres"
    kept: bool = False
    rejected: str = ""
    residual_deg: float = float("nan")
    residual: float = float("nan")
    model: str = ""

    def to_dict(self, names: Sequence[str]) -> dict[str, Any]:
        """The sidecar JSON's record of the edge (``names``: the scans' names by index)."""
        return {
            "src": int(self.src), "ref": int(self.ref), "src_scan": names[self.src],
            "ref_scan": names[self.ref], "kind": self.kind, "registered": bool(self.registered),
            "reason": self.reason or None, "kept": bool(self.kept),
            "rejected": self.rejected or None, "confidence": float(self.confidence),
            "fitness": float(self.fitness), "T_ref_src": np.asarray(self.transform).tolist(),
            "information": np.asarray(self.information).tolist(),
            "voxel": _finite_or_none(self.voxel),
            "residual_deg": _finite_or_none(self.residual_deg),
            "residual": _finite_or_none(self.residual), "units": self.units,
            "time_s": float(self.time_s), "model": self.model or None,
        }  # fmt: skip


def _finite_or_none(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _edge(src: int, ref: int, kind: str, result: Any, clouds: Sequence[np.ndarray]) -> Edge:
    """An :class:`Edge` from a :class:`~pcreg.registration.RegistrationResult`, or from the
    reason a pair has none (a string: its worker died)."""
    if isinstance(result, str):
        return Edge(src, ref, kind, np.eye(4), False, result)
    transform = np.asarray(result.transform, np.float64)
    voxel = float(result.voxel_size)
    info = np.zeros((6, 6))
    if result.registered:
        info = information_matrix(clouds[src], clouds[ref], transform, voxel)
    return Edge(
        src, ref, kind, transform, bool(result.registered), result.reason or "",
        float(result.confidence), float(result.fitness), info, voxel, float(result.time_s),
        result.units, model=getattr(result, "model", "") or "",
    )  # fmt: skip


def _result(ray: Any, ref: Any) -> Any:
    """A task's result; a pair the pipeline refused (its one-line
    :class:`~pcreg.errors.InputError`, not Ray's wrapper with the worker's traceback) or whose
    worker died on both tries (Ray retries it once) gives the reason, a string: an
    unregistered edge, so that one pair does not lose the map."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as err:
        cause = getattr(err, "cause", None)
        if isinstance(cause, InputError):
            return f"refused: {cause}"
        raise
    except ray.exceptions.RayError as err:  # the worker (or its node) died, twice
        lines = str(err).strip().splitlines()
        return f"its Ray worker died twice ({type(err).__name__}: {lines[0] if lines else ''})"


def register_edges(
    clouds: Sequence[np.ndarray],
    names: Sequence[str],
    pairs: Sequence[tuple[int, int, str]],
    options: Any,
    *,
    workers: int | None = None,
    address: str | None = None,
    progress: bool = True,
    then: Callable[[list[Edge]], Sequence[tuple[int, int, str]]] | None = None,
) -> list[Edge]:
    """Register every candidate pair and measure its information matrix.

    Args:
        clouds: the scans, ``(N_k, 3)`` float64, input units.
        names: their names (files), for errors and logs.
        pairs: ``(src, ref, kind)`` per candidate.
        options: the pipeline options of every pair (:class:`~pcreg.batch.runner.BatchOptions`).
        workers: Ray CPUs of a local cluster (default all cores); 1 without ``address``:
            one pair after another in this process, without Ray.
        address: an existing Ray cluster (or ``RAY_ADDRESS``).
        progress: a tqdm bar over the pairs.
        then: a second round: given the edges of ``pairs``, the pairs to register next, on
            the same cluster (a sequence's loop candidates follow from its chained
            consecutive pairs, :func:`pcreg.mapping.candidates.revisits`).

    Returns:
        One :class:`Edge` per pair, in the order of ``pairs`` (then of ``then``'s); a pair the
        pipeline refuses (memory cap, too few points after cleaning, ...) is an unregistered
        edge whose reason says why (the scans themselves are checked before any pair runs).
    """
    bar = tqdm(total=len(pairs), desc="map edges", unit="pair", disable=not progress)
    rounds = [list(pairs)]
    edges: list[Edge] = []

    def finish(done: list[Any]) -> None:
        """The edges of the round just run; the next round's pairs."""
        batch = rounds[-1]
        edges.extend(
            _edge(i, j, kind, r, clouds) for (i, j, kind), r in zip(batch, done, strict=True)
        )
        if then is not None and len(rounds) == 1:
            more = list(then(list(edges)))
            if more:
                rounds.append(more)
                bar.total += len(more)
                bar.refresh()

    with bar:
        if address is None and (workers == 1 or len(pairs) < 2):
            pipe = options.pipeline()
            while len(edges) < sum(map(len, rounds)):
                done: list[Any] = []
                for i, j, _ in rounds[-1]:
                    try:
                        done.append(pipe(clouds[i], clouds[j], (names[i], names[j])))
                    except InputError as err:  # this pair only: an unregistered edge
                        done.append(f"refused: {err}")
                    bar.update(1)
                finish(done)
        else:
            import ray

            from pcreg.batch.runner import RayRunner

            start = time.perf_counter()
            with RayRunner(options, address=address, workers=workers) as runner:
                logger.info("Ray ready in %.1f s", time.perf_counter() - start)
                stored: dict[int, Any] = {}  # the clouds in the object store, once
                while len(edges) < sum(map(len, rounds)):
                    batch = rounds[-1]
                    done = [None] * len(batch)
                    pending = runner.submit_arrays(
                        clouds, [(i, j) for i, j, _ in batch], names, stored
                    )
                    while pending:
                        ready, _ = ray.wait(list(pending), num_returns=1)
                        for ref in ready:
                            done[pending.pop(ref)] = _result(ray, ref)
                            bar.update(1)
                    finish(done)
    for e in edges:
        logger.info(
            "edge %s -> %s: %s (confidence %.2f)", names[e.src], names[e.ref],
            "registered" if e.registered else f"not registered: {e.reason}", e.confidence,
        )  # fmt: skip
    return edges
