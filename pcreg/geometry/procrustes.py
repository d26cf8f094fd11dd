"""Weighted Procrustes (Kabsch) alignment, batched, with the reflection fix.

Solves ``min_{R,t} sum_i w_i |R s_i + t - r_i|^2`` in closed form (Arun et al. 1987; Umeyama
1991 for the ``det = -1`` correction). Runs on the inputs' device; no CPU round-trip.
"""

from __future__ import annotations

import torch
from torch import Tensor

from pcreg.geometry.transforms import make_transform

__all__ = ["weighted_procrustes"]


def weighted_procrustes(
    src_points: Tensor,
    ref_points: Tensor,
    weights: Tensor | None = None,
    *,
    eps: float = 1e-8,
) -> Tensor:
    """Rigid transform ``T_ref_src`` that best maps ``src_points`` onto ``ref_points``.

    Args:
        src_points: ``(..., N, 3)`` source correspondences.
        ref_points: ``(..., N, 3)`` reference correspondences (row i matches row i).
        weights: ``(..., N)`` non-negative weights (e.g. confidences; 0 removes a pair).
            ``None`` means all ones. Negative weights are clamped to 0.
        eps: added to the weight sum so that an all-zero weight set does not divide by zero.

    Returns:
        ``(..., 4, 4)`` transforms in the inputs' dtype. With fewer than 3 non-degenerate
        weighted pairs the rotation is not unique; the SVD then returns one valid rotation.

    Notes:
        Everything runs in the input dtype on the input device. Points are centred before the
        covariance is formed, so float32 is accurate to ~1e-6 relative even far from the origin.
    """
    if src_points.shape != ref_points.shape or src_points.shape[-1] != 3:
        raise ValueError(
            f"src_points and ref_points must both be (..., N, 3), got {tuple(src_points.shape)} "
            f"and {tuple(ref_points.shape)}"
        )
    if weights is None:
        weights = src_points.new_ones(src_points.shape[:-1])
    elif weights.shape != src_points.shape[:-1]:
        raise ValueError(
            f"weights must be (..., N) = {tuple(src_points.shape[:-1])}, got {tuple(weights.shape)}"
        )
    weights = weights.clamp(min=0)
    w = weights / (weights.sum(dim=-1, keepdim=True) + eps)  # (..., N)
    w3 = w.unsqueeze(-1)
    src_center = (src_points * w3).sum(dim=-2, keepdim=True)  # (..., 1, 3)
    ref_center = (ref_points * w3).sum(dim=-2, keepdim=True)
    src_c = src_points - src_center
    ref_c = ref_points - ref_center
    cov = src_c.transpose(-1, -2) @ (ref_c * w3)  # (..., 3, 3) = sum w s r^T
    u, _, vh = torch.linalg.svd(cov)
    v = vh.transpose(-1, -2)
    ut = u.transpose(-1, -2)
    # Reflection fix: force det(R) = +1 by flipping the axis of the smallest singular value.
    sign = torch.sign(torch.det(v @ ut))
    sign = torch.where(sign == 0, torch.ones_like(sign), sign)
    diag = torch.ones_like(cov[..., 0])
    diag[..., -1] = sign
    rotation = v @ torch.diag_embed(diag) @ ut
    translation = ref_center.squeeze(-2) - (rotation @ src_center.transpose(-1, -2)).squeeze(-1)
    return make_transform(rotation, translation)
