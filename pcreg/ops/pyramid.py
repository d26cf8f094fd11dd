"""The multi-stage neighbor pyramid a KPConv backbone consumes, and neighbor-limit calibration.

Stage 0 is the input cloud (already voxelised by the data pipeline at ``voxel_size``). Stage
``i >= 1`` is the grid subsampling of stage ``i - 1`` at ``voxel_size * 2**i``; the search radius
doubles the same way (``radius * 2**i``). Per stage this follows GeoTransformer's
``precompute_data_stack_mode`` (Qin et al. 2022; follows
qinzheng93/GeoTransformer:geotransformer/utils/data.py):

* ``neighbors[i]``: stage ``i`` points within ``radius_i`` of each stage ``i`` point, capped at
  ``neighbor_limits[i]``;
* ``subsampling[i]``: stage ``i`` points within ``radius_i`` of each stage ``i + 1`` point
  (pooling);
* ``upsampling[i]``: stage ``i + 1`` points within ``2 radius_i`` of each stage ``i`` point,
  capped at ``neighbor_limits[i + 1]``; column 0 is the nearest (nearest upsampling).

All index tensors are nearest first and padded with the shadow index ``len(target stage)``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from pcreg.ops.grid_subsample import grid_subsample
from pcreg.ops.neighbors import radius_search

__all__ = [
    "Pyramid",
    "build_pyramid",
    "calibrate_neighbor_limits",
    "pyramid_items",
    "subsample_stages",
]

logger = logging.getLogger(__name__)


class Pyramid(NamedTuple):
    """Per-stage tensors of a packed batch (lists indexed by stage, coarse stages last).

    Attributes:
        points: ``num_stages`` tensors ``(ΣN_i, 3)``.
        lengths: ``num_stages`` tensors ``(B,)`` int64.
        neighbors: ``num_stages`` tensors ``(ΣN_i, K_i)`` int64 into stage ``i`` (shadow ``ΣN_i``).
        subsampling: ``num_stages - 1`` tensors ``(ΣN_{i+1}, K_i)`` int64 into stage ``i``.
        upsampling: ``num_stages - 1`` tensors ``(ΣN_i, K_{i+1})`` int64 into stage ``i + 1``.
    """

    points: list[Tensor]
    lengths: list[Tensor]
    neighbors: list[Tensor]
    subsampling: list[Tensor]
    upsampling: list[Tensor]


def subsample_stages(
    points: Tensor, lengths: Tensor, num_stages: int, voxel_size: float
) -> tuple[list[Tensor], list[Tensor]]:
    """Points and lengths of every stage: stage 0 as given, stage i at ``voxel_size * 2**i``."""
    if num_stages < 1:
        raise ValueError(f"num_stages must be >= 1, got {num_stages}")
    pts, lens = [points], [lengths.to(torch.long)]
    for i in range(1, num_stages):
        p, n = grid_subsample(pts[-1], lens[-1], voxel_size * 2**i)
        pts.append(p)
        lens.append(n)
    return pts, lens


def build_pyramid(
    points: Tensor,
    lengths: Tensor,
    *,
    num_stages: int,
    voxel_size: float,
    radius: float,
    neighbor_limits: Sequence[int | None],
    backend: str = "auto",
) -> Pyramid:
    """Build the neighbor pyramid of a packed batch.

    Args:
        points: ``(ΣN, 3)`` float, packed stage-0 points (metres).
        lengths: ``(B,)`` int item sizes.
        num_stages: number of stages (4 for 3DMatch, 5 for KITTI in GeoTransformer).
        voxel_size: stage-0 voxel size in metres (stage i uses ``voxel_size * 2**i``).
        radius: stage-0 neighborhood radius in metres (e.g. 2.5 x voxel; doubles per stage).
        neighbor_limits: per-stage cap on neighbors (``None`` = unbounded); calibrate with
            :func:`calibrate_neighbor_limits`.
        backend: neighbor-search backend (see :mod:`pcreg.ops.neighbors`).
    """
    if len(neighbor_limits) != num_stages:
        raise ValueError(
            f"neighbor_limits has {len(neighbor_limits)} entries for {num_stages} stages"
        )
    pts, lens = subsample_stages(points, lengths, num_stages, voxel_size)
    neighbors, subsampling, upsampling = [], [], []
    for i in range(num_stages):
        r = radius * 2**i
        neighbors.append(
            radius_search(
                pts[i],
                pts[i],
                r,
                max_neighbors=neighbor_limits[i],
                query_lengths=lens[i],
                support_lengths=lens[i],
                backend=backend,
            ).indices
        )
        if i + 1 < num_stages:
            subsampling.append(
                radius_search(
                    pts[i + 1],
                    pts[i],
                    r,
                    max_neighbors=neighbor_limits[i],
                    query_lengths=lens[i + 1],
                    support_lengths=lens[i],
                    backend=backend,
                ).indices
            )
            upsampling.append(
                radius_search(
                    pts[i],
                    pts[i + 1],
                    2 * r,
                    max_neighbors=neighbor_limits[i + 1],
                    query_lengths=lens[i],
                    support_lengths=lens[i + 1],
                    backend=backend,
                ).indices
            )
    return Pyramid(pts, lens, neighbors, subsampling, upsampling)


def _reindex(indices: Tensor, offset: int, count: int, total: int) -> Tensor:
    """Indices into a packed stage of ``total`` rows -> into its rows ``offset:offset+count``;
    the shadow index ``total`` becomes the new shadow ``count``."""
    return torch.where(indices >= total, count, indices - offset)


def pyramid_items(pyramid: Pyramid, start: int, stop: int) -> Pyramid:
    """The pyramid of batch items ``start:stop`` alone, as :func:`build_pyramid` would have built
    it for them (neighbors never cross items, so slicing rows and shifting indices is exact;
    index tensors keep the batch's width, the extra columns all shadow).

    Args:
        pyramid: a packed pyramid over ``B`` items.
        start, stop: the item range, ``0 <= start < stop <= B``.
    """
    num_items = pyramid.lengths[0].numel()
    if not 0 <= start < stop <= num_items:
        raise ValueError(f"items {start}:{stop} out of a pyramid of {num_items}")
    offsets, counts, totals = [], [], []
    for lens in pyramid.lengths:
        offsets.append(int(lens[:start].sum()))
        counts.append(int(lens[start:stop].sum()))
        totals.append(int(lens.sum()))

    def rows(t: Tensor, i: int) -> Tensor:
        return t[offsets[i] : offsets[i] + counts[i]]

    def into(t: Tensor, i: int) -> Tensor:
        return _reindex(t, offsets[i], counts[i], totals[i])

    stages = range(len(pyramid.points))
    return Pyramid(
        points=[rows(pyramid.points[i], i) for i in stages],
        lengths=[lens[start:stop] for lens in pyramid.lengths],
        neighbors=[into(rows(pyramid.neighbors[i], i), i) for i in stages],
        subsampling=[into(rows(t, i + 1), i) for i, t in enumerate(pyramid.subsampling)],
        upsampling=[into(rows(t, i), i + 1) for i, t in enumerate(pyramid.upsampling)],
    )


def calibrate_neighbor_limits(
    samples: Iterable[Tensor | tuple[Tensor, Tensor]],
    *,
    num_stages: int,
    voxel_size: float,
    radius: float,
    coverage: float = 0.8,
    backend: str = "auto",
) -> list[int]:
    """Per-stage neighbor limits that cover ``coverage`` of all neighborhoods in ``samples``.

    For each stage the limit is the ``coverage`` quantile of the neighborhood sizes (radius
    ``radius * 2**i``) over every point of every sample, rounded up and at least 1 — so tiny
    clouds never get a limit of 0 (a failure users met upstream, GeoTransformer issues #32/#52).

    Args:
        samples: stage-0 clouds, each ``(N, 3)`` or a packed ``(points, lengths)`` pair.
        num_stages, voxel_size, radius: as in :func:`build_pyramid`.
        coverage: fraction of neighborhoods kept whole (GeoTransformer uses 0.8).

    Returns:
        ``num_stages`` ints.
    """
    if not 0.0 < coverage <= 1.0:
        raise ValueError(f"coverage must be in (0, 1], got {coverage}")
    counts: list[list[Tensor]] = [[] for _ in range(num_stages)]
    seen = 0
    for sample in samples:
        if isinstance(sample, tuple):
            points, lengths = sample
        else:
            points, lengths = sample, torch.tensor([sample.shape[0]])
        pts, lens = subsample_stages(points, lengths, num_stages, voxel_size)
        for i in range(num_stages):
            nb = radius_search(
                pts[i],
                pts[i],
                radius * 2**i,
                query_lengths=lens[i],
                support_lengths=lens[i],
                backend=backend,
            )
            counts[i].append((nb.indices < pts[i].shape[0]).sum(1).cpu())
        seen += 1
    if seen == 0:
        raise ValueError("calibrate_neighbor_limits needs at least one sample")
    limits = []
    for i in range(num_stages):
        c = torch.cat(counts[i]).double()
        limits.append(max(1, math.ceil(float(torch.quantile(c, coverage))) if c.numel() else 1))
    logger.info(
        "calibrated neighbor limits %s over %d samples (coverage %.2f)", limits, seen, coverage
    )
    return limits
