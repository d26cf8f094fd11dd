"""Point-matching loss: negative log-likelihood of the ground-truth assignment under the
Sinkhorn scores, dustbins included (GeoTransformer §3.6)."""

from __future__ import annotations

import torch
from torch import Tensor

from pcreg.geometry.transforms import apply_transform

__all__ = ["point_matching_labels", "point_matching_loss"]


def point_matching_labels(
    src_knn_points: Tensor,
    ref_knn_points: Tensor,
    src_knn_valid: Tensor,
    ref_knn_valid: Tensor,
    transforms: Tensor,
    positive_radius: float,
) -> Tensor:
    """Ground-truth assignment ``(P, K+1, K+1)`` bool of patch pairs: (i, j) when source point
    j moved by its pair's transform lies within ``positive_radius`` of reference point i; a real
    point with no partner is labelled with the opposite dustbin.

    src/ref_knn_points ``(P, K, 3)``, valid ``(P, K)``, transforms ``(P, 4, 4)`` (per patch).
    """
    moved = apply_transform(src_knn_points, transforms.to(src_knn_points.dtype))
    close = torch.cdist(ref_knn_points, moved) < positive_radius
    close &= ref_knn_valid[:, :, None] & src_knn_valid[:, None, :]
    p, k, m = close.shape
    labels = torch.zeros(p, k + 1, m + 1, dtype=torch.bool, device=close.device)
    labels[:, :k, :m] = close
    labels[:, :k, m] = ~close.any(2) & ref_knn_valid
    labels[:, k, :m] = ~close.any(1) & src_knn_valid
    return labels


def point_matching_loss(
    log_assignment: Tensor,
    src_knn_points: Tensor,
    ref_knn_points: Tensor,
    src_knn_valid: Tensor,
    ref_knn_valid: Tensor,
    transforms: Tensor,
    positive_radius: float,
) -> Tensor:
    """Mean of ``-log_assignment`` over all ground-truth labels (see
    :func:`point_matching_labels`). log_assignment ``(P, K+1, K+1)`` (reference rows)."""
    labels = point_matching_labels(
        src_knn_points, ref_knn_points, src_knn_valid, ref_knn_valid, transforms, positive_radius
    )
    if not bool(labels.any()):
        return log_assignment.sum() * 0.0
    return -log_assignment[labels].mean()
