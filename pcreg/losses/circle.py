"""Overlap-aware circle loss on superpoint features (GeoTransformer §3.6; circle loss: Sun et
al., CVPR 2020).

For an anchor superpoint i with positives P (overlap > positive_overlap) and negatives N
(overlap = 0), feature distances d and λ_ij = sqrt(overlap_ij):

    L_i = 1/γ · log(1 + Σ_{j∈P} exp(γ λ_ij β_p^j (d_ij - Δ_p)) · Σ_{k∈N} exp(γ β_n^k (Δ_n - d_ik)))

with β_p^j = max(0, d_ij - O_p) and β_n^k = max(0, O_n - d_ik) treated as constants. Anchors
of the reference side (rows) and of the source side (columns) that have at least one positive
and one negative are averaged per side, then the two sides.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from pcreg.losses.targets import NodeTargets

__all__ = ["overlap_aware_circle_loss"]


def _anchor_losses(d: Tensor, overlaps: Tensor, pos: Tensor, neg: Tensor, h: dict) -> Tensor:
    """Loss of every row of ``d (R, C)`` that has a positive and a negative."""
    gamma = h["log_scale"]
    beta_p = (torch.relu(d - h["pos_optimal"]) * overlaps.sqrt()).detach()
    beta_n = torch.relu(h["neg_optimal"] - d).detach()
    low = -1e9
    pos_logits = (gamma * beta_p * (d - h["pos_margin"])).masked_fill(~pos, low)
    neg_logits = (gamma * beta_n * (h["neg_margin"] - d)).masked_fill(~neg, low)
    loss = F.softplus(torch.logsumexp(pos_logits, 1) + torch.logsumexp(neg_logits, 1)) / gamma
    return loss[pos.any(1) & neg.any(1)]


def overlap_aware_circle_loss(
    src_feats: Tensor,
    ref_feats: Tensor,
    src_valid: Tensor,
    ref_valid: Tensor,
    targets: list[NodeTargets],
    *,
    positive_overlap: float = 0.1,
    pos_margin: float = 0.1,
    neg_margin: float = 1.4,
    pos_optimal: float = 0.1,
    neg_optimal: float = 1.4,
    log_scale: float = 24.0,
) -> Tensor:
    """Mean over pairs of the coarse loss.

    src_feats ``(B, M, C)`` / ref_feats ``(B, N, C)``: L2-normalised superpoint features
    (padded; masks True = real); targets: one :class:`NodeTargets` per pair.
    """
    h = {
        "pos_margin": pos_margin,
        "neg_margin": neg_margin,
        "pos_optimal": pos_optimal,
        "neg_optimal": neg_optimal,
        "log_scale": log_scale,
    }
    losses = []
    for b, t in enumerate(targets):
        n, m = int(ref_valid[b].sum()), int(src_valid[b].sum())
        rf, sf = ref_feats[b, :n], src_feats[b, :m]
        d = torch.sqrt((2.0 - 2.0 * rf @ sf.T).clamp(min=1e-12))
        overlaps = d.new_zeros(n, m)
        overlaps[t.ref_indices, t.src_indices] = t.overlaps.to(d.dtype)
        pos = overlaps > positive_overlap
        neg = overlaps == 0
        rows = _anchor_losses(d, overlaps, pos, neg, h)
        cols = _anchor_losses(d.T, overlaps.T, pos.T, neg.T, h)
        if rows.numel() and cols.numel():
            losses.append(0.5 * (rows.mean() + cols.mean()))
    if not losses:
        return ref_feats.sum() * 0.0  # no anchors: a zero that keeps the graph
    return torch.stack(losses).mean()
