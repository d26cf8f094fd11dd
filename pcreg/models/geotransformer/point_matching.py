"""Dense correspondences from the Sinkhorn scores of matched patches (GeoTransformer §3.4)."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["mutual_topk_correspondences"]


def mutual_topk_correspondences(
    scores: Tensor,
    src_valid: Tensor,
    ref_valid: Tensor,
    k: int,
    confidence_threshold: float,
    mutual: bool = True,
) -> Tensor:
    """Correspondence mask of patch pairs from their assignment scores.

    A pair (i, j) is kept when j is among i's top-k and (``mutual``) i among j's top-k, its
    score exceeds ``confidence_threshold`` in both directions' selections, and both points are
    real.

    Args:
        scores ``(P, K, K)``: assignment probabilities (``exp`` of the Sinkhorn output without the
            dustbins).
        src_valid ``(P, K)``, ref_valid ``(P, K)``: real patch points (the scores' columns
            and rows).
        k: top-k per row / column (3 for 3DMatch, 2 for KITTI).
    Returns:
        ``(P, K, K)`` bool.
    """
    kr = min(k, scores.shape[2])
    kc = min(k, scores.shape[1])
    row_top = torch.zeros_like(scores, dtype=torch.bool)
    row_top.scatter_(2, scores.topk(kr, dim=2).indices, True)
    col_top = torch.zeros_like(scores, dtype=torch.bool)
    col_top.scatter_(1, scores.topk(kc, dim=1).indices, True)
    confident = scores > confidence_threshold
    selected = (row_top & col_top) if mutual else (row_top | col_top)
    return selected & confident & ref_valid[:, :, None] & src_valid[:, None, :]
