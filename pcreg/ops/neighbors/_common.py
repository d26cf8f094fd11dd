"""Shared plumbing of the neighbor-search backends: validation, ragged batches, padding.

A backend implements two per-item functions on one query set ``q (m, 3)`` and one support set
``s (n, 3)`` (n >= 1, m >= 1) and returns *local* candidate indices into ``s``:

* ``knn(q, s, k) -> (idx (m, k'), sqdist or None, is_sorted)`` with ``k' = min(k, n)``;
* ``radius(q, s, radius, cap) -> (idx (m, K), sqdist or None, is_sorted)`` where ``cap`` is the
  maximum number of neighbors (or ``None`` for all), padded with ``-1``. Candidates may include
  points outside the radius (they are filtered here) but must contain the nearest ``cap`` ones.

:func:`finalize` then computes exact distances where a backend gave none, filters by radius,
sorts nearest first, truncates, and converts to packed global indices padded with the shadow
index ``len(support)`` (KPConv's convention: a gather at that row reads a zero feature row).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

from pcreg.ops.packing import lengths_to_offsets

__all__ = ["Neighbors", "check_inputs", "finalize", "run_batched"]


class Neighbors(NamedTuple):
    """Result of a neighbor search over packed batches.

    Attributes:
        indices: ``(M, K) int64`` rows into the packed support, nearest first; missing
            neighbors are the shadow index ``len(support)``.
        distances: ``(M, K)`` Euclidean distances in the inputs' dtype and units (metres);
            ``inf`` where the index is the shadow index.
    """

    indices: Tensor
    distances: Tensor


def check_inputs(
    query: Tensor,
    support: Tensor,
    query_lengths: Tensor | None,
    support_lengths: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """Validate shapes/devices; return ``(query_lengths, support_lengths)``, int64 on the CPU."""
    for name, x in (("query", query), ("support", support)):
        if not isinstance(x, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.ndim != 2 or x.shape[1] != 3:
            raise ValueError(f"{name} must be (N, 3), got {tuple(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(f"{name} must be floating point, got {x.dtype}")
    if query.device != support.device:
        raise ValueError(f"query on {query.device} but support on {support.device}")
    if query.dtype != support.dtype:
        raise TypeError(f"query is {query.dtype} but support is {support.dtype}")
    if (query_lengths is None) != (support_lengths is None):
        raise ValueError("give both query_lengths and support_lengths, or neither")
    if query_lengths is None:
        return (torch.tensor([query.shape[0]]), torch.tensor([support.shape[0]]))
    q_len = torch.as_tensor(query_lengths).to("cpu", torch.long).flatten()
    s_len = torch.as_tensor(support_lengths).to("cpu", torch.long).flatten()
    if q_len.numel() != s_len.numel():
        raise ValueError(
            f"query_lengths has {q_len.numel()} items but support_lengths has {s_len.numel()}"
        )
    if (q_len < 0).any() or (s_len < 0).any():
        raise ValueError("lengths must be non-negative")
    if int(q_len.sum()) != query.shape[0]:
        raise ValueError(
            f"sum(query_lengths) = {int(q_len.sum())} != len(query) = {query.shape[0]}"
        )
    if int(s_len.sum()) != support.shape[0]:
        raise ValueError(
            f"sum(support_lengths) = {int(s_len.sum())} != len(support) = {support.shape[0]}"
        )
    return q_len, s_len


def finalize(
    q: Tensor,
    s: Tensor,
    idx: Tensor,
    sqdist: Tensor | None,
    is_sorted: bool,
    k: int,
    radius: float | None,
) -> tuple[Tensor, Tensor]:
    """Exact distances, radius filter, sort, truncate to ``k`` columns; local indices, ``-1`` pads.

    Returns ``(idx (m, k) int64, dist (m, k))`` with ``dist = inf`` where ``idx = -1``.
    """
    idx = idx.to(device=q.device, dtype=torch.long)
    missing = idx < 0
    if sqdist is None:
        # Direct differences, not the x^2 - 2xy + y^2 expansion: exact to rounding (DESIGN §2).
        diff = q.unsqueeze(1) - s[idx.clamp(min=0)]  # (m, K, 3)
        dist = diff.square().sum(-1).sqrt()
    else:
        dist = sqdist.to(device=q.device, dtype=q.dtype).clamp(min=0).sqrt()
    if radius is not None:
        missing = missing | (dist > radius)
    # In sorted rows the missing entries (padding, beyond the radius) are a tail, so marking
    # them inf keeps the rows sorted; only unsorted candidates need the sort.
    dist = dist.masked_fill(missing, float("inf"))
    if not is_sorted:
        dist, order = torch.sort(dist, dim=1, stable=True)
        idx = torch.gather(idx, 1, order)
    idx = idx[:, :k]
    dist = dist[:, :k]
    idx = idx.masked_fill(torch.isinf(dist), -1)
    if idx.shape[1] < k:  # fewer support points than k
        pad = k - idx.shape[1]
        idx = torch.nn.functional.pad(idx, (0, pad), value=-1)
        dist = torch.nn.functional.pad(dist, (0, pad), value=float("inf"))
    return idx, dist


ItemSearch = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]


def run_batched(
    query: Tensor,
    support: Tensor,
    q_len: Tensor,
    s_len: Tensor,
    search_item: ItemSearch,
    width: int | None = None,
) -> Neighbors:
    """Run ``search_item(q, s) -> (local idx (m, K), dist (m, K))`` (``-1`` / ``inf`` pads) on
    every batch item and assemble packed global indices padded with the shadow index
    ``len(support)``. ``width=None`` sizes the output to the widest neighborhood found."""
    shadow = support.shape[0]
    q_off = lengths_to_offsets(q_len).tolist()
    s_off = lengths_to_offsets(s_len).tolist()
    parts: list[tuple[int, int, int, Tensor, Tensor]] = []
    for b in range(q_len.numel()):
        q0, q1, s0, s1 = q_off[b], q_off[b + 1], s_off[b], s_off[b + 1]
        if q1 == q0 or s1 == s0 or width == 0:
            continue  # no queries, or an empty support item: every neighbor is the shadow
        idx, dist = search_item(query[q0:q1], support[s0:s1])
        parts.append((q0, q1, s0, idx, dist))
    if width is None:
        width = max((int((p[3] >= 0).sum(1).max()) for p in parts), default=0)
    indices = torch.full((query.shape[0], width), shadow, dtype=torch.long, device=query.device)
    distances = torch.full(
        (query.shape[0], width), float("inf"), dtype=query.dtype, device=query.device
    )
    for q0, q1, s0, idx, dist in parts:
        cols = min(width, idx.shape[1])
        idx = idx[:, :cols]
        indices[q0:q1, :cols] = torch.where(idx >= 0, idx + s0, torch.full_like(idx, shadow))
        distances[q0:q1, :cols] = dist[:, :cols]
    return Neighbors(indices, distances)
