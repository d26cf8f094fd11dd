"""Parameter-free point-cloud ops: neighbor search, grid subsampling, the KPConv neighbor
pyramid and batch packing. Torch (and numpy) only; optional backends import lazily."""

from pcreg.ops.grid_subsample import grid_subsample
from pcreg.ops.neighbors import Neighbors, available_backends, knn, radius_search
from pcreg.ops.packing import lengths_to_offsets, packed_to_padded, padded_to_packed
from pcreg.ops.partition import point_to_node_partition
from pcreg.ops.pyramid import Pyramid, build_pyramid, calibrate_neighbor_limits

__all__ = [
    "Neighbors",
    "Pyramid",
    "available_backends",
    "build_pyramid",
    "calibrate_neighbor_limits",
    "grid_subsample",
    "knn",
    "lengths_to_offsets",
    "packed_to_padded",
    "padded_to_packed",
    "point_to_node_partition",
    "radius_search",
]
