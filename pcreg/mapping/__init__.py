"""Multiway registration: a map from many scans (``pcreg map``, :func:`pcreg.map`).

One concept per module: :mod:`~pcreg.mapping.candidates` (which pairs to register),
:mod:`~pcreg.mapping.edges` (their registrations), :mod:`~pcreg.registration.information` (the
6x6 information matrix and covariance of a registration),
:mod:`~pcreg.mapping.graph` (the pose graph: which edges agree, the poses),
:mod:`~pcreg.mapping.build` (the three in order: :func:`build_map`),
:mod:`~pcreg.mapping.segments` (the graph split into segments, one valid pose per scan: odometry
with loop closure) and :mod:`~pcreg.mapping.outputs` (poses, sidecar, merged map, picture,
report).
"""

from pcreg.mapping.build import CONVENTION, MapResult, build_map, sequence_edges
from pcreg.mapping.candidates import CANDIDATES, candidate_pairs, overlap_scores, revisits
from pcreg.mapping.edges import Edge, register_edges
from pcreg.mapping.graph import GraphOptions, GraphResult, optimise_graph
from pcreg.mapping.outputs import OUTPUT_NAMES, output_paths, write_map
from pcreg.mapping.segments import SegmentedGraph, place_segments
from pcreg.registration.information import information_matrix, pose_covariance

__all__ = [
    "CANDIDATES",
    "CONVENTION",
    "OUTPUT_NAMES",
    "Edge",
    "GraphOptions",
    "GraphResult",
    "MapResult",
    "SegmentedGraph",
    "build_map",
    "candidate_pairs",
    "information_matrix",
    "optimise_graph",
    "output_paths",
    "overlap_scores",
    "place_segments",
    "pose_covariance",
    "register_edges",
    "revisits",
    "sequence_edges",
    "write_map",
]
