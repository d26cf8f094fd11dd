"""Local-to-global registration (GeoTransformer §3.5) in numpy, for the torch-free path.

The same computation as :mod:`pcreg.models.geotransformer.lgr` and
:func:`pcreg.geometry.procrustes.weighted_procrustes`, step by step and in the same dtypes:

- the weighted-Procrustes hypotheses and refinements and the residuals of the final inlier
  test run in the points' dtype (float32 for the network's outputs, as in torch);
- :func:`inlier_counts` (the votes among the hypotheses) runs in float64, as in torch.

Sums, products and the 3x3 SVDs run in numpy's / LAPACK's order rather than torch's / MKL's,
so transforms agree with torch to ~1e-6, not bit for bit; an inlier decision can differ only
for a residual within that of the acceptance radius. No torch import.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "apply_transform",
    "inlier_counts",
    "local_to_global_registration",
    "weighted_procrustes",
]


def _make_transform(
    rotation: NDArray[np.floating], translation: NDArray[np.floating]
) -> NDArray[np.floating]:
    """``(..., 4, 4)`` from ``rotation (..., 3, 3)`` and ``translation (..., 3)`` (metres)."""
    batch = np.broadcast_shapes(rotation.shape[:-2], translation.shape[:-1])
    out = np.zeros((*batch, 4, 4), dtype=rotation.dtype)
    out[..., :3, :3] = rotation
    out[..., :3, 3] = translation
    out[..., 3, 3] = 1.0
    return out


def apply_transform(points: ArrayLike, transform: ArrayLike) -> NDArray[np.floating]:
    """``points (..., N, 3)`` moved by ``transform (..., 4, 4)``: ``points @ R^T + t``, in the
    inputs' dtype (metres)."""
    points = np.asarray(points)
    transform = np.asarray(transform)
    rotation = transform[..., :3, :3]
    translation = transform[..., :3, 3]
    return points @ np.swapaxes(rotation, -1, -2) + translation[..., None, :]


def weighted_procrustes(
    src_points: ArrayLike,
    ref_points: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    eps: float = 1e-8,
) -> NDArray[np.floating]:
    """Rigid transform ``T_ref_src`` minimising ``sum_i w_i |R s_i + t - r_i|^2``, batched.

    Args:
        src_points: ``(..., N, 3)`` source correspondences (metres).
        ref_points: ``(..., N, 3)`` reference correspondences (row i matches row i).
        weights: ``(..., N)`` non-negative weights (negative ones count as 0); ``None`` = ones.
        eps: added to the weight sum, so an all-zero weight set does not divide by zero.
    Returns:
        ``(..., 4, 4)`` in the inputs' dtype (every step runs in it, as in torch). The
        reflection fix flips the axis of the smallest singular value when ``det(V U^T) < 0``.
    Raises:
        ValueError: shapes that are not ``(..., N, 3)`` / ``(..., N)``.
    """
    src = np.asarray(src_points)
    ref = np.asarray(ref_points)
    if src.shape != ref.shape or src.shape[-1] != 3:
        raise ValueError(
            f"src_points and ref_points must both be (..., N, 3), got {src.shape} and {ref.shape}"
        )
    if weights is None:
        weights = np.ones(src.shape[:-1], dtype=src.dtype)
    else:
        weights = np.asarray(weights)
        if weights.shape != src.shape[:-1]:
            raise ValueError(f"weights must be (..., N) = {src.shape[:-1]}, got {weights.shape}")
    weights = np.maximum(weights, 0)
    w = weights / (weights.sum(axis=-1, keepdims=True) + eps)
    w3 = w[..., None]
    src_center = (src * w3).sum(axis=-2, keepdims=True)  # (..., 1, 3)
    ref_center = (ref * w3).sum(axis=-2, keepdims=True)
    src_c = src - src_center
    ref_c = ref - ref_center
    cov = np.swapaxes(src_c, -1, -2) @ (ref_c * w3)  # (..., 3, 3) = sum w s r^T
    u, _, vh = np.linalg.svd(cov)
    v = np.swapaxes(vh, -1, -2)
    ut = np.swapaxes(u, -1, -2)
    sign = np.sign(np.linalg.det(v @ ut))
    sign = np.where(sign == 0, 1, sign).astype(cov.dtype)
    diag = np.ones(cov.shape[:-1], dtype=cov.dtype)
    diag[..., -1] = sign
    rotation = (v * diag[..., None, :]) @ ut  # v @ diag(d) @ u^T
    translation = ref_center[..., 0, :] - (rotation @ np.swapaxes(src_center, -1, -2))[..., 0]
    return _make_transform(rotation, translation)


def inlier_counts(
    src: ArrayLike, ref: ArrayLike, transforms: ArrayLike, radius: float
) -> NDArray[np.int64]:
    """``(H,)`` int64: for each of ``transforms (H, 4, 4)``, how many of the correspondences
    ``src (C, 3)`` -> ``ref (C, 3)`` it moves within ``radius`` metres (strictly less).

    In float64 on points centred at their means, through the same bilinear form as the torch
    version (one ``(H, 26) @ (26, C)`` product of per-transform coefficients and
    per-correspondence features, keeping ``R^T R``).
    """
    s = np.asarray(src, dtype=np.float64)
    r = np.asarray(ref, dtype=np.float64)
    t_all = np.asarray(transforms, dtype=np.float64)
    mu_s, mu_r = s.mean(axis=0), r.mean(axis=0)
    s, r = s - mu_s, r - mu_r
    rot = t_all[:, :3, :3]
    # the translation acting on the centred points: R (s + mu_s) + t - (r + mu_r)
    t = t_all[:, :3, 3] + rot @ mu_s - mu_r
    c, h = s.shape[0], rot.shape[0]
    feats = np.concatenate(
        [
            (r[:, :, None] * s[:, None, :]).reshape(c, 9),
            (s[:, :, None] * s[:, None, :]).reshape(c, 9),
            s,
            r,
            (r * r).sum(axis=1, keepdims=True),
            np.ones((c, 1)),
        ],
        axis=1,
    )
    rot_t = np.swapaxes(rot, 1, 2)
    coef = np.concatenate(
        [
            -2.0 * rot.reshape(h, 9),
            (rot_t @ rot).reshape(h, 9),
            2.0 * (rot_t @ t[:, :, None])[:, :, 0],
            -2.0 * t,
            np.ones((h, 1)),
            (t * t).sum(axis=1, keepdims=True),
        ],
        axis=1,
    )
    return ((coef @ feats.T) < radius**2).sum(axis=1).astype(np.int64)


def _residual(
    src: NDArray[np.floating], ref: NDArray[np.floating], transform: NDArray[np.floating]
) -> NDArray[np.floating]:
    d = apply_transform(src, transform) - ref
    return np.sqrt(np.sum(d * d, axis=-1))


def local_to_global_registration(
    src_points: ArrayLike,
    ref_points: ArrayLike,
    scores: ArrayLike,
    patch_index: ArrayLike,
    acceptance_radius: float,
    min_correspondences: int = 3,
    num_refinement_steps: int = 5,
) -> tuple[NDArray[np.floating], NDArray[np.bool_]]:
    """Estimate ``T_ref_src`` of one pair from its dense correspondences.

    Every patch with at least ``min_correspondences`` correspondences (else the patches with
    the most) proposes the weighted-Procrustes fit of its own correspondences (points' dtype);
    the proposal moving the most correspondences within ``acceptance_radius`` wins (float64
    counts, first one on a tie); it is refined by ``num_refinement_steps`` weighted-Procrustes
    re-solves on its inliers (weights ``scores * inlier``; stops early below 3 inliers).

    Args:
        src_points ``(C, 3)``, ref_points ``(C, 3)``: correspondences in metres, float32 from
            the network (row i matches row i).
        scores ``(C,)``: their confidences (non-negative weights).
        patch_index ``(C,)``: int, the patch pair each correspondence came from.
        acceptance_radius: inlier distance in metres (strictly less).
        min_correspondences: a patch proposes a hypothesis when it has at least this many.
        num_refinement_steps: weighted-Procrustes re-solves on the inliers.
    Returns:
        ``transform (4, 4)`` in the points' dtype and the final inlier mask ``(C,)`` bool
        (residual in the points' dtype). With no correspondences the identity and an empty
        mask.
    """
    src = np.asarray(src_points)
    ref = np.asarray(ref_points)
    w = np.asarray(scores)
    c = ref.shape[0]
    if c == 0:
        return np.eye(4, dtype=ref.dtype), np.zeros(0, dtype=bool)
    patches, inverse, counts = np.unique(
        np.asarray(patch_index), return_inverse=True, return_counts=True
    )
    inverse = inverse.reshape(-1)
    proposing = counts >= min_correspondences
    if not proposing.any():
        proposing = counts == counts.max()
    # group correspondences per patch into a padded (H, L, 3) batch, as torch does
    order = np.argsort(inverse, kind="stable")
    starts = np.cumsum(counts) - counts
    rank = np.arange(c) - starts[inverse[order]]
    length = int(counts.max())
    h = patches.shape[0]
    ref_b = np.zeros((h, length, 3), dtype=ref.dtype)
    src_b = np.zeros((h, length, 3), dtype=src.dtype)
    w_b = np.zeros((h, length), dtype=w.dtype)
    ref_b[inverse[order], rank] = ref[order]
    src_b[inverse[order], rank] = src[order]
    w_b[inverse[order], rank] = w[order]
    hypotheses = weighted_procrustes(src_b[proposing], ref_b[proposing], w_b[proposing])
    votes = inlier_counts(src, ref, hypotheses, acceptance_radius)
    transform = hypotheses[int(votes.argmax())]
    for _ in range(num_refinement_steps):
        inliers = _residual(src, ref, transform) < acceptance_radius
        if int(inliers.sum()) < 3:
            break
        transform = weighted_procrustes(src, ref, w * inliers)
    return transform, _residual(src, ref, transform) < acceptance_radius
