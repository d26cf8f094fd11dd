"""Segments of a pose graph: every scan gets a valid pose, in the frame of the first scan of
the part of the graph it belongs to (``pcreg odometry --loop-closure``).

:func:`~pcreg.mapping.graph.optimise_graph` places the scans its kept edges connect to the
reference scan and leaves every other scan unplaced (NaN), never guessed: right for a map,
where one frame holds every scan or none. Odometry's rule is one valid pose per scan, split
into *segments* (:mod:`pcreg.odometry`). :func:`place_segments` reconciles the two without
guessing a motion the edges do not give:

1. Segment 0 is the graph of every scan: the scans it places, in the first scan's frame
   (exactly the map's placement when the first scan has a kept edge).
2. The first scan (input order) not yet in a segment starts the next segment: the graph is
   optimised again over the scans not yet in a segment and the registered edges among them,
   with that scan as the reference; the scans it places join the segment, in that scan's
   frame. A scan without a kept edge among them is a segment of its own (pose ``I``).
3. Until every scan is in a segment.

Segments are numbered in the order of their first scan and need not be contiguous (a loop
edge may bring scan 7 back to segment 0 after scan 5 started segment 1). An edge is judged in
the last round that held both its scans; an edge between two segments is never kept.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from pcreg.mapping.edges import Edge
from pcreg.mapping.graph import GraphOptions, optimise_graph

__all__ = ["SegmentedGraph", "place_segments"]

logger = logging.getLogger(__name__)


@dataclass
class SegmentedGraph:
    """``poses (K, 4, 4) float64``: scan k -> the first scan of its segment (all finite),
    ``segments (K,) int`` (0 for the first scan's, numbered in the order of their first scan)
    and ``starts`` ({first scan of a segment other than 0: why the graph could not place it
    in an earlier one}); the edges' ``kept`` / ``rejected`` / residuals are set in place."""

    poses: np.ndarray
    segments: np.ndarray
    starts: dict[int, str]


def place_segments(
    clouds: Sequence[np.ndarray], edges: Sequence[Edge], options: GraphOptions | None = None
) -> SegmentedGraph:
    """Split the scans into segments of the pose graph and place each (module docstring).

    Args:
        clouds: the ``K`` scans ``(N_k, 3)``, input units.
        edges: the candidates (:func:`~pcreg.mapping.edges.register_edges`), ``src``/``ref``
            indices into ``clouds``.
        options: the graph's tolerances (:class:`~pcreg.mapping.graph.GraphOptions`).

    Returns:
        The :class:`SegmentedGraph`.
    """
    count = len(clouds)
    poses = np.full((count, 4, 4), np.nan)
    segments = np.full(count, -1)
    starts: dict[int, str] = {}
    why: dict[int, str] = {}  # the latest reason the graph gave for not placing a scan
    for e in edges:
        e.kept, e.rejected = False, "" if e.registered else "not registered"
    number = 0
    while (segments < 0).any():
        left = np.flatnonzero(segments < 0).tolist()
        local = {k: n for n, k in enumerate(left)}
        inside = [n for n, e in enumerate(edges) if e.src in local and e.ref in local]
        sub = [replace(edges[n], src=local[edges[n].src], ref=local[edges[n].ref]) for n in inside]
        members, placed = [left[0]], np.eye(4)[None]  # the first scan alone, unless the graph
        if any(e.registered for e in sub):  # places more with it as its reference
            result = optimise_graph([clouds[k] for k in left], sub, options)
            for n, e in zip(inside, sub, strict=True):  # the verdicts of this round stand
                edges[n].kept, edges[n].rejected = e.kept, e.rejected
                edges[n].residual_deg, edges[n].residual = e.residual_deg, e.residual
            why.update({left[i]: r for i, r in result.unplaced.items()})
            if result.reference == 0:
                on = np.flatnonzero(result.placed).tolist()
                members, placed = [left[i] for i in on], result.poses[on]
        poses[members] = placed
        segments[members] = number
        if number:
            starts[left[0]] = why.get(left[0], "no candidate edge of this scan registered")
            logger.info("segment %d starts at scan %d (%d scans): %s", number, left[0],
                        len(members), starts[left[0]])  # fmt: skip
        number += 1
    return SegmentedGraph(poses, segments, starts)
