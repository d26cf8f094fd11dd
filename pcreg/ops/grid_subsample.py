"""Voxel-grid subsampling of packed batches: one point per occupied voxel, at the centroid
(barycentre) of the points that fall in it — KPConv's grid subsampling (Thomas et al. 2019)."""

from __future__ import annotations

import torch
from torch import Tensor

from pcreg._constants import GRID_PHASE  # defined torch-free, for pcreg.runtime too
from pcreg.ops.packing import packed_batch_index

__all__ = ["GRID_PHASE", "grid_subsample"]


def grid_subsample(
    points: Tensor, lengths: Tensor | None = None, voxel_size: float = 0.025
) -> tuple[Tensor, Tensor]:
    """Subsample packed clouds on a regular grid.

    Voxels are cells ``floor((p - min_b) / voxel_size + GRID_PHASE)`` with ``min_b`` the
    minimum corner of batch item ``b``, so items never share a voxel and the boundaries avoid
    quantised coordinates (:data:`GRID_PHASE`).

    Args:
        points: ``(ΣN, 3)`` float, packed points (metres).
        lengths: ``(B,)`` int item sizes; ``None`` for a single item.
        voxel_size: cell edge in metres (> 0).

    Returns:
        ``(sub_points (ΣM, 3), sub_lengths (B,) int64)``: centroids in the input dtype, packed
        by item, each item's voxels in lexicographic (x, y, z) cell order.
    """
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f"points must be (N, 3), got {tuple(points.shape)}")
    if not voxel_size > 0:
        raise ValueError(f"voxel_size must be > 0, got {voxel_size}")
    if lengths is None:
        lengths = torch.tensor([points.shape[0]], device=points.device)
    lengths = lengths.to(device=points.device, dtype=torch.long)
    if int(lengths.sum()) != points.shape[0]:
        raise ValueError(f"sum(lengths) = {int(lengths.sum())} != len(points) = {points.shape[0]}")
    batch = lengths.numel()
    if points.shape[0] == 0:
        return points.clone(), torch.zeros(batch, dtype=torch.long, device=points.device)

    item = packed_batch_index(lengths)  # (ΣN,)
    pts64 = points.double()
    lo = torch.full((batch, 3), float("inf"), dtype=torch.float64, device=points.device)
    lo = lo.scatter_reduce(0, item[:, None].expand(-1, 3), pts64, reduce="amin")
    cells = torch.floor((pts64 - lo[item]) / voxel_size + GRID_PHASE).long()  # (ΣN, 3), >= 0
    dims = cells.max(dim=0).values + 1
    # One int64 key per (item, cell) when it fits in 62 bits, else a lexicographic unique.
    span = float(batch) * float(dims[0]) * float(dims[1]) * float(dims[2])
    if span < 2.0**62:
        key = ((item * dims[0] + cells[:, 0]) * dims[1] + cells[:, 1]) * dims[2] + cells[:, 2]
        _, inverse = torch.unique(key, sorted=True, return_inverse=True)
    else:
        _, inverse = torch.unique(
            torch.cat([item[:, None], cells], dim=1), dim=0, sorted=True, return_inverse=True
        )
    num = int(inverse.max()) + 1
    sums = torch.zeros(num, 3, dtype=torch.float64, device=points.device).index_add_(
        0, inverse, pts64
    )
    counts = torch.zeros(num, dtype=torch.float64, device=points.device).index_add_(
        0, inverse, torch.ones_like(inverse, dtype=torch.float64)
    )
    centroids = (sums / counts[:, None]).to(points.dtype)
    voxel_item = torch.zeros(num, dtype=torch.long, device=points.device).scatter_(0, inverse, item)
    sub_lengths = torch.bincount(voxel_item, minlength=batch)
    return centroids, sub_lengths
