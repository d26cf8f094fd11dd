"""SHOT local reference frames in numpy: what
:func:`pcreg.models.backbones.kpconv.frames.local_reference_frames` computes for a
rotation-invariant KPConv backbone (its docstring has the construction and the references),
so that the ONNX Runtime path can pass them to the exported backbone (ONNX has no symmetric
eigensolver)."""

from __future__ import annotations

import numpy as np

__all__ = ["local_reference_frames"]


def local_reference_frames(
    q_points: np.ndarray, s_points: np.ndarray, neighbor_indices: np.ndarray, radius: float
) -> np.ndarray:
    """Frames ``(M, 3, 3)`` float64 whose columns are the x, y, z axes at each query.

    Args:
        q_points: ``(M, 3)`` queries; s_points: ``(N, 3)`` support points (metres).
        neighbor_indices: ``(M, H)`` int64 into ``s_points``, ``N`` = padding (shadow).
        radius: neighborhood radius in metres (the KPConv's).

    Float64 throughout, as the torch version: the weighted covariance of each neighborhood,
    its eigenvectors (x: largest, z: smallest eigenvalue) signed so that the weighted mean
    offset projects positively, y = z × x; a query without neighbors gets the identity.
    """
    n = len(s_points)
    valid = neighbor_indices < n
    padded = np.concatenate([s_points, np.zeros((1, 3), s_points.dtype)], 0).astype(np.float64)
    rel = padded[neighbor_indices] - np.asarray(q_points, np.float64)[:, None, :]  # (M, H, 3)
    w = np.clip(radius - np.sqrt(_dot3(rel, rel)), 0, None) * valid  # (M, H)
    wtot = w.sum(1)
    wsum = np.maximum(wtot, 1e-12)
    wrel = rel * w[..., None]
    cov = np.matmul(wrel.transpose(0, 2, 1), rel) / wsum[:, None, None]  # (M, 3, 3)
    _, vecs = np.linalg.eigh(cov)
    x, z = vecs[..., 2], vecs[..., 0]
    mean = wrel.sum(1) / wsum[:, None]
    x = np.where(_dot3(mean, x)[:, None] < 0, -x, x)
    z = np.where(_dot3(mean, z)[:, None] < 0, -z, z)
    y = np.cross(z, x)
    frames = np.stack([x, y, z], axis=-1)
    frames[wtot <= 0] = np.eye(3)
    return frames


def _dot3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(...)``: the dot product over the last axis of ``a, b (..., 3)``, summed in numpy's
    order for three terms (bit-identical to ``(a * b).sum(-1)``), as three whole-array
    products: numpy reduces a last axis of 3 one element at a time, which made the frames of
    a KITTI pair's 18 neighbourhoods 15 % slower (0.17 against 0.14 s)."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]
