"""Superpoint (coarse) matching (GeoTransformer §3.3)."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["superpoint_matching"]


def superpoint_matching(
    src_feats: Tensor,
    ref_feats: Tensor,
    src_valid: Tensor,
    ref_valid: Tensor,
    num_correspondences: int,
    dual_normalization: bool = True,
) -> tuple[Tensor, Tensor, Tensor]:
    """Top-k superpoint correspondences of one pair by (dual-normalised) feature similarity.

    s_ij = exp(-|f_i - g_j|²) on L2-normalised features; with dual normalisation
    s_ij ← (s_ij / Σ_k s_ik) (s_ij / Σ_k s_kj), which suppresses ambiguous matches.

    Args:
        src_feats ``(M, C)``, ref_feats ``(N, C)``: superpoint features (normalised here).
        src_valid ``(M,)``, ref_valid ``(N,)``: superpoints that may match (real and with a
            non-empty patch).
        num_correspondences: k (256 in GeoTransformer); fewer when fewer valid pairs exist.
    Returns:
        ``src_indices (k,)``, ``ref_indices (k,)`` int64 and ``scores (k,)``, best first.
    """
    ref = torch.nn.functional.normalize(ref_feats, dim=-1)
    src = torch.nn.functional.normalize(src_feats, dim=-1)
    sq = (2.0 - 2.0 * ref @ src.T).clamp(min=0.0)
    sim = torch.exp(-sq)
    pair_valid = ref_valid[:, None] & src_valid[None, :]
    sim = sim * pair_valid
    if dual_normalization:
        row = sim / sim.sum(1, keepdim=True).clamp(min=1e-12)
        col = sim / sim.sum(0, keepdim=True).clamp(min=1e-12)
        sim = row * col
    k = min(num_correspondences, int(pair_valid.sum()))
    scores, flat = sim.flatten().topk(k)
    m = src.shape[0]
    return flat % m, flat // m, scores
