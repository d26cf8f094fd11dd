"""Ground-truth superpoint correspondences and their overlaps (GeoTransformer §3.6).

Two superpoints correspond when their patches overlap under the ground-truth transform: the
overlap of a patch pair is the mean of the fraction of reference patch points that have a
source patch point within ``positive_radius`` and the same fraction the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from pcreg.geometry.transforms import apply_transform
from pcreg.ops.partition import Patches

__all__ = ["NodeTargets", "node_targets", "sample_node_targets"]


@dataclass
class NodeTargets:
    """Superpoint pairs with overlap > 0 of one pair of clouds: indices ``(T,)`` and overlap
    ``(T,)`` in (0, 1]."""

    src_indices: Tensor
    ref_indices: Tensor
    overlaps: Tensor


def _patch_radius(valid: Tensor, knn: Tensor, nodes: Tensor) -> Tensor:
    d = torch.linalg.vector_norm(knn - nodes[:, None], dim=-1).masked_fill(~valid, 0.0)
    return d.max(dim=1).values


def node_targets(
    src: Patches, ref: Patches, transform: Tensor, positive_radius: float
) -> NodeTargets:
    """Overlapping superpoint pairs of one pair under ``transform`` (``T_ref_src``, 4x4)."""
    transform = transform.to(ref.nodes.dtype)
    src_nodes = apply_transform(src.nodes, transform)
    src_knn = apply_transform(src.knn_points, transform)
    r_ref = _patch_radius(ref.knn_valid, ref.knn_points, ref.nodes)
    r_src = _patch_radius(src.knn_valid, src_knn, src_nodes)
    centre = ref.nodes.mean(0, keepdim=True)
    dist = torch.cdist(ref.nodes - centre, src_nodes - centre)
    candidate = dist < r_ref[:, None] + r_src[None, :] + positive_radius
    candidate &= ref.node_valid[:, None] & src.node_valid[None, :]
    ri, si = candidate.nonzero(as_tuple=True)
    if ri.numel() == 0:
        empty = ri.new_zeros(0)
        return NodeTargets(empty.clone(), empty, ref.nodes.new_zeros(0))
    rv, sv = ref.knn_valid[ri], src.knn_valid[si]
    close = torch.cdist(ref.knn_points[ri], src_knn[si]) < positive_radius  # (C, K, K)
    close &= rv[:, :, None] & sv[:, None, :]
    ref_frac = close.any(2).sum(1) / rv.sum(1).clamp(min=1)
    src_frac = close.any(1).sum(1) / sv.sum(1).clamp(min=1)
    overlap = 0.5 * (ref_frac + src_frac)
    keep = overlap > 0
    return NodeTargets(si[keep], ri[keep], overlap[keep].to(ref.nodes.dtype))


def sample_node_targets(
    targets: NodeTargets, num_targets: int, overlap_threshold: float, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Superpoint correspondences that feed the fine stage in training: the pairs with overlap
    above ``overlap_threshold``, at most ``num_targets`` of them drawn uniformly without
    replacement (GeoTransformer: 128 with overlap > 0.1). Returns ``(src_indices,
    ref_indices)``."""
    keep = (targets.overlaps > overlap_threshold).nonzero(as_tuple=True)[0]
    if keep.numel() > num_targets:
        pick = torch.randperm(keep.numel(), generator=generator)[:num_targets]
        keep = keep[pick.to(keep.device)]
    return targets.src_indices[keep], targets.ref_indices[keep]
