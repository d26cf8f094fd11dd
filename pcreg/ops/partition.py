"""Point-to-node partition: the patches around superpoints (GeoTransformer §3.4).

Parameter-free, so both the model and the training targets (computed before ``forward``) use it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from pcreg.ops.packing import lengths_to_offsets
from pcreg.ops.pyramid import Pyramid

__all__ = ["Patches", "partition_pair_batch", "point_to_node_partition"]


def point_to_node_partition(
    points: Tensor, nodes: Tensor, point_limit: int, valid: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """Assign every point to its nearest superpoint; each superpoint keeps its ``point_limit``
    nearest assigned points (its patch).

    Args:
        points ``(N, 3)``: fine points of one cloud. nodes ``(M, 3)``: its superpoints.
        point_limit: patch size K (64 for 3DMatch, 128 for KITTI).
        valid ``(N,)``: optional mask of real points (padding never joins a patch).
    Returns:
        ``node_valid (M,)`` bool (non-empty patch), ``knn_indices (M, K)`` int64 into points
        (shadow ``N`` where the patch is short), ``knn_valid (M, K)`` bool.
    """
    n = points.shape[0]
    centre = nodes.mean(0, keepdim=True)
    sq = torch.cdist(points - centre, nodes - centre).square()  # (N, M)
    if valid is not None:
        sq = sq.masked_fill(~valid[:, None], float("inf"))
    assignment = sq.argmin(dim=1)  # (N,)
    member = assignment[None, :] == torch.arange(nodes.shape[0], device=points.device)[:, None]
    if valid is not None:
        member &= valid[None, :]
    node_valid = member.any(dim=1)
    k = min(point_limit, n)
    dist = sq.T.masked_fill(~member, float("inf"))  # (M, N)
    knn_dist, knn_indices = dist.topk(k, dim=1, largest=False)
    knn_valid = torch.isfinite(knn_dist)
    knn_indices = knn_indices.masked_fill(~knn_valid, n)
    if k < point_limit:  # fewer points than the patch size: pad the columns
        pad = point_limit - k
        knn_indices = torch.cat([knn_indices, knn_indices.new_full((nodes.shape[0], pad), n)], 1)
        knn_valid = torch.cat([knn_valid, knn_valid.new_zeros(nodes.shape[0], pad)], 1)
    return node_valid, knn_indices, knn_valid


@dataclass
class Patches:
    """Superpoints of one cloud of one pair and their patches of fine points.

    nodes ``(M, 3)``; node_valid ``(M,)`` (non-empty patch); knn_indices ``(M, K)`` into the
    item's fine points (shadow = number of fine points); knn_valid ``(M, K)``;
    knn_points ``(M, K, 3)`` (zeros where invalid); points ``(N_f, 3)`` the fine points.
    """

    nodes: Tensor
    node_valid: Tensor
    knn_indices: Tensor
    knn_valid: Tensor
    knn_points: Tensor
    points: Tensor


def partition_pair_batch(
    pyramid: Pyramid, batch_size: int, point_limit: int
) -> tuple[list[Patches], list[Patches]]:
    """Patches of every reference and source in a pair batch (fine = pyramid stage 1, coarse =
    the last stage) of the packed layout (references first). Returns ``(srcs, refs)``, each a
    list of ``batch_size`` :class:`Patches`."""
    fine_pts, coarse_pts = pyramid.points[1], pyramid.points[-1]
    fine_off = lengths_to_offsets(pyramid.lengths[1]).tolist()
    coarse_off = lengths_to_offsets(pyramid.lengths[-1]).tolist()
    out: list[Patches] = []
    for item in range(2 * batch_size):
        pts = fine_pts[fine_off[item] : fine_off[item + 1]]
        nodes = coarse_pts[coarse_off[item] : coarse_off[item + 1]]
        node_valid, idx, valid = point_to_node_partition(pts, nodes, point_limit)
        padded = torch.cat([pts, pts.new_zeros(1, 3)], 0)
        out.append(Patches(nodes, node_valid, idx, valid, padded[idx], pts))
    return out[batch_size:], out[:batch_size]
