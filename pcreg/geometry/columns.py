"""Reductions over the points of an ``(N, D)`` array, one column at a time.

numpy 2.4 reduces axis 0 of a C-ordered ``(N, 3)`` array (``a.min(0)``) and axis 1 (``a.max(1)``)
with an inner loop of length 3, one point at a time; a column ``a[:, i]`` is reduced as one
long strided loop. On a 121,618-point KITTI scan (float64, 2-core AMD EPYC, median of 20):
``a.min(0)`` 2.55 ms against 0.11 ms a column at a time (int64 1.24 against 0.09 ms), and
``a.max(1)`` 3.7 ms against 0.5 ms as two ``np.maximum``. The registration pipeline's checks,
cleaning and grids called them about 70 times per KITTI pair (77 ms of its 1.04 s). Results
are identical: a minimum or maximum does not depend on the order it is taken in.
"""

from __future__ import annotations

import numpy as np

__all__ = ["column_max", "column_min", "row_max"]


def column_min(a: np.ndarray) -> np.ndarray:
    """``(D,)``: the minimum of each column of ``a (N, D)``, ``N >= 1`` (``a.min(0)``)."""
    a = np.asarray(a)
    return np.array([a[:, i].min() for i in range(a.shape[1])], dtype=a.dtype)


def column_max(a: np.ndarray) -> np.ndarray:
    """``(D,)``: the maximum of each column of ``a (N, D)``, ``N >= 1`` (``a.max(0)``)."""
    a = np.asarray(a)
    return np.array([a[:, i].max() for i in range(a.shape[1])], dtype=a.dtype)


def row_max(a: np.ndarray) -> np.ndarray:
    """``(N,)``: the maximum of each row of ``a (N, D)``, ``D >= 1`` (``a.max(1)``)."""
    a = np.asarray(a)
    out = a[:, 0].copy()
    for i in range(1, a.shape[1]):
        np.maximum(out, a[:, i], out=out)
    return out
