"""A map from many scans: candidate pairs, their registrations, the pose graph, the poses.

:func:`build_map` runs the three steps (:mod:`~pcreg.mapping.candidates`,
:mod:`~pcreg.mapping.edges`, :mod:`~pcreg.mapping.graph`) and returns a :class:`MapResult`:
``T_world_scan`` for every scan in the order given, the world being the first scan's frame
(or, when the first scan has no kept edge, the reference the result names), NaN for a scan
the graph could not place.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pcreg.errors import InputError
from pcreg.mapping.candidates import candidate_pairs, overlap_scores, revisits
from pcreg.mapping.edges import Edge, register_edges
from pcreg.mapping.graph import GraphOptions, optimise_graph

__all__ = ["CONVENTION", "MapResult", "build_map", "sequence_edges"]

logger = logging.getLogger(__name__)

CONVENTION = (
    "T_world_scan: maps points of each scan into the world frame, the frame of the reference "
    "scan (the first scan given unless it could not be placed; see 'reference'); an unplaced "
    "scan's pose is NaN (its poses.txt line is 12 'nan')"
)


@dataclass
class MapResult:
    """A map of ``K`` scans.

    Attributes:
        names: the scans' names (files, or ``scan k`` for arrays), in the order given.
        poses: ``(K, 4, 4) float64`` ``T_world_scan`` in the input's units; NaN for an
            unplaced scan.
        placed: ``(K,) bool``.
        reference: the scan whose frame is the world (0 unless scan 0 is unplaced).
        unplaced: ``{scan index: why}``.
        edges: every candidate :class:`~pcreg.mapping.edges.Edge` with its verdict and
            whether the graph kept it.
        sequence, candidates: how the candidate pairs were chosen.
        units: the unit the pipeline read the scans in (the most common over the edges).
        voxel: the median registration voxel of the registered edges, input units (the map's
            default voxel).
        scores: ``(K, K)`` overlap scores of ``"knn"`` candidates, or None.
    """

    names: list[str]
    poses: np.ndarray
    placed: np.ndarray
    reference: int
    unplaced: dict[int, str]
    edges: list[Edge]
    sequence: bool = False
    candidates: str = "all"
    units: str = "metres"
    voxel: float = float("nan")
    scores: np.ndarray | None = field(default=None, repr=False)

    @property
    def complete(self) -> bool:
        """Every scan placed."""
        return bool(self.placed.all())

    @property
    def metres_per_unit(self) -> float:
        from pcreg.registration.scale import METRES_PER_UNIT

        return METRES_PER_UNIT.get(self.units, 1.0)

    def to_dict(self) -> dict[str, Any]:
        """:meth:`record`, under the name :meth:`~pcreg.registration.result.
        RegistrationResult.to_dict` has (a newcomer looked for it)."""
        return self.record()

    def record(self) -> dict[str, Any]:
        """The sidecar JSON: frame, convention, scans, every edge, the unplaced scans."""
        return {
            "frame": {"reference": self.reference, "scan": self.names[self.reference]},
            "convention": CONVENTION,
            "units": self.units,
            "scans": self.names,
            "placed": self.placed.tolist(),
            "unplaced": [
                {"scan": k, "name": self.names[k], "reason": why}
                for k, why in sorted(self.unplaced.items())
            ],
            "candidates": {
                "sequence": self.sequence,
                "mode": self.candidates,
                "pairs": len(self.edges),
            },
            "edges": [e.to_dict(self.names) for e in self.edges],
            "poses": [
                p.tolist() if ok else None for p, ok in zip(self.poses, self.placed, strict=True)
            ],
        }


def sequence_edges(
    clouds: Sequence[np.ndarray],
    names: Sequence[str],
    options: Any,
    *,
    neighbours: int,
    workers: int | None = None,
    address: str | None = None,
    progress: bool = True,
) -> tuple[list[Edge], np.ndarray]:
    """The edges of a sequence with loop candidates by overlap score (``"knn"``): the
    consecutive pairs are registered first, and each scan's ``neighbours`` best-scoring
    revisits (:func:`~pcreg.mapping.candidates.revisits`, from the chained consecutive
    registrations) next, on the same cluster. Returns the edges (consecutive, then loops) and
    the ``(K, K)`` overlap scores. Arguments as :func:`build_map`."""
    scores = overlap_scores(clouds)
    first = [(k, k - 1, "sequence") for k in range(1, len(clouds))]

    def loops(done: list[Edge]) -> list[tuple[int, int, str]]:
        steps = {e.src: e.transform if e.registered else None for e in done}
        mask = revisits(clouds, [steps[k] for k in range(1, len(clouds))])
        pairs, _ = candidate_pairs(
            clouds, sequence=True, candidates="knn", neighbours=neighbours, revisit=mask,
            scores=scores,
        )  # fmt: skip
        out = [p for p in pairs if p[2] == "loop"]
        logger.info("%d loop candidates: %d pairs are revisits", len(out),
                    int(np.triu(mask).sum()))  # fmt: skip
        return out

    edges = register_edges(
        clouds, names, first, options, workers=workers, address=address, progress=progress,
        then=loops,
    )  # fmt: skip
    return edges, scores


def build_map(
    clouds: Sequence[np.ndarray],
    names: Sequence[str] | None = None,
    *,
    options: Any = None,
    sequence: bool = False,
    candidates: str = "all",
    neighbours: int = 5,
    workers: int | None = None,
    address: str | None = None,
    graph: GraphOptions | None = None,
    progress: bool = True,
) -> MapResult:
    """Register the candidate pairs of ``clouds`` and place the scans by the pose graph.

    Args:
        clouds: ``K >= 2`` scans ``(N_k, 3)`` float64, input units, each in its own frame.
        names: their names (default ``scan k``).
        options: the pipeline options of every pair (:class:`~pcreg.batch.runner.BatchOptions`;
            default ``method="auto"``, the model chosen per pair).
        sequence, candidates, neighbours: the candidate pairs
            (:func:`~pcreg.mapping.candidates.candidate_pairs`; a sequence with ``"knn"``
            registers its consecutive pairs first and takes its loop candidates among their
            chain's revisits: :func:`sequence_edges`).
        workers, address: where the pairs run (:func:`~pcreg.mapping.edges.register_edges`).
        graph: the graph's tolerances (:class:`~pcreg.mapping.graph.GraphOptions`).
        progress: a progress bar over the pairs.

    Raises:
        InputError: fewer than two scans, a bad candidates choice, a pair the pipeline
            refuses.
    """
    from pcreg.batch.runner import BatchOptions

    if len(clouds) < 2:
        raise InputError("scans", f"a map needs at least two scans, got {len(clouds)}")
    names = [f"scan {k}" for k in range(len(clouds))] if names is None else list(names)
    options = options or BatchOptions(method="auto")
    if sequence and candidates == "knn":  # loops among the revisits of the chain
        if neighbours < 1:
            raise InputError("neighbours", f"must be at least 1, got {neighbours}")
        edges, scores = sequence_edges(
            clouds, names, options, neighbours=neighbours, workers=workers, address=address,
            progress=progress,
        )  # fmt: skip
    else:
        pairs, scores = candidate_pairs(
            clouds, sequence=sequence, candidates=candidates, neighbours=neighbours
        )
        logger.info("%d scans, %d candidate pairs (%s%s)", len(clouds), len(pairs), candidates,
                    ", sequence" if sequence else "")  # fmt: skip
        edges = register_edges(
            clouds, names, pairs, options, workers=workers, address=address, progress=progress
        )
    result = optimise_graph(clouds, edges, graph)
    registered = [e for e in edges if e.registered]
    units = max({e.units for e in registered} or {"metres"},
                key=lambda u: sum(e.units == u for e in registered))  # fmt: skip
    voxel = float(np.median([e.voxel for e in registered])) if registered else float("nan")
    for k, why in sorted(result.unplaced.items()):
        logger.warning("%s: not placed: %s", names[k], why)
    return MapResult(
        names, result.poses, result.placed, result.reference, result.unplaced, edges,
        sequence, candidates, units, voxel, scores,
    )  # fmt: skip
