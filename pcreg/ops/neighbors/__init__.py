"""Neighbor search over packed (ragged) batches: ``knn`` and ``radius_search``.

Both take packed clouds (``query (ΣM, 3)`` with ``query_lengths (B,)``, ``support (ΣN, 3)``
with ``support_lengths (B,)``); item ``b`` of the query is searched only in item ``b`` of the
support, never across items. Results are nearest first and padded with the shadow index
``len(support)`` (KPConv's convention), with ``inf`` distances there.

Backends (``backend=``):

============  ===================================================================
``reference``  exact O(M·N) float64 oracle; for tests and tiny inputs
``torch``      chunked brute force, any device, no extra dependency
``open3d``     Open3D ``core.nns`` KD-tree (CPU; CUDA tensors round-trip to CPU)
``keops``      pykeops lazy tensors (JIT kernels; for CUDA, also runs on CPU)
``auto``       the rule in :func:`resolve_backend`
============  ===================================================================

Every backend returns the same neighbor sets as ``reference`` (up to exact distance ties)
with distances recomputed or reported by direct differences, never the float32 expansion.
"""

from __future__ import annotations

import logging
from types import ModuleType

import torch
from torch import Tensor

from pcreg.ops.neighbors import _keops, _open3d, _reference, _torch
from pcreg.ops.neighbors._common import Neighbors, check_inputs, finalize, run_batched

__all__ = ["BACKENDS", "Neighbors", "available_backends", "knn", "radius_search", "resolve_backend"]

_MODULES: dict[str, ModuleType] = {m.NAME: m for m in (_reference, _torch, _open3d, _keops)}
logger = logging.getLogger(__name__)
_WARNED: set[str] = set()  # one warning per reason and process
BACKENDS = tuple(_MODULES)


def available_backends() -> list[str]:
    """Backends whose dependencies are installed, e.g. ``['reference', 'torch', 'open3d']``."""
    return [name for name, mod in _MODULES.items() if mod.is_available()]


def resolve_backend(backend: str, device: torch.device | str) -> str:
    """Map ``"auto"`` (or a concrete name) to a backend for tensors on ``device``.

    The ``auto`` rule, from the measurements in BENCHMARKS.md (2-core CPU: Open3D's KD-tree is
    the fastest method at 20k and 100k points, brute force is 10-100x slower; KeOps brute
    force only pays off on a GPU):

    * CUDA tensors: ``keops`` if pykeops is installed and runs on this GPU, else ``torch``
      (a broken KeOps / CUDA pairing crashes the process instead of raising, so whether it
      runs is checked once in a child process: :func:`~pcreg.ops.neighbors._keops.cuda_verdict`;
      ``backend="keops"`` skips the check);
    * CPU tensors: ``open3d`` if installed, else ``torch``.
    """
    if backend != "auto":
        if backend not in _MODULES:
            raise ValueError(
                f"unknown neighbor backend {backend!r}; choose from auto, {', '.join(BACKENDS)}"
            )
        if not _MODULES[backend].is_available():
            raise ImportError(
                f"neighbor backend {backend!r} is not installed: {_MODULES[backend].INSTALL_HINT}"
            )
        return backend
    if torch.device(device).type == "cuda":
        if not _keops.is_available():
            return "torch"
        runs, why = _keops.cuda_verdict()
        if not runs and why not in _WARNED:
            _WARNED.add(why)
            logger.warning(
                "KeOps does not run on this GPU (%s): neighbor search uses the slower torch "
                "backend", why,
            )  # fmt: skip
        return "keops" if runs else "torch"
    return "open3d" if _open3d.is_available() else "torch"


def knn(
    query: Tensor,
    support: Tensor,
    k: int,
    *,
    query_lengths: Tensor | None = None,
    support_lengths: Tensor | None = None,
    backend: str = "auto",
) -> Neighbors:
    """The ``k`` nearest support points of every query point, within its batch item.

    Args:
        query: ``(ΣM, 3)`` float, packed query points (metres).
        support: ``(ΣN, 3)`` same dtype/device, packed support points.
        k: number of neighbors (>= 1). Items with fewer than ``k`` support points are padded.
        query_lengths, support_lengths: ``(B,)`` int item sizes; both ``None`` for one item.
        backend: see the module docstring.

    Returns:
        :class:`Neighbors` with ``indices (ΣM, k) int64`` (shadow ``ΣN`` where missing) and
        ``distances (ΣM, k)`` (``inf`` where missing), nearest first.
    """
    if int(k) < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    q_len, s_len = check_inputs(query, support, query_lengths, support_lengths)
    mod = _MODULES[resolve_backend(backend, query.device)]

    def search(q: Tensor, s: Tensor) -> tuple[Tensor, Tensor]:
        idx, d2, is_sorted = mod.knn(q, s, int(k))
        return finalize(q, s, idx, d2, is_sorted, int(k), None)

    return run_batched(query, support, q_len, s_len, search, int(k))


def radius_search(
    query: Tensor,
    support: Tensor,
    radius: float,
    *,
    max_neighbors: int | None = None,
    query_lengths: Tensor | None = None,
    support_lengths: Tensor | None = None,
    backend: str = "auto",
) -> Neighbors:
    """Support points within ``radius`` (inclusive) of every query point, nearest first.

    Args:
        query, support, query_lengths, support_lengths, backend: as in :func:`knn`.
        radius: search radius in metres (> 0).
        max_neighbors: keep at most this many (the nearest); ``None`` keeps all, and the
            width is then the largest neighborhood found.

    Returns:
        :class:`Neighbors` with ``(ΣM, K)`` indices and distances, ``K = max_neighbors`` (or the
        largest count), padded with the shadow index ``ΣN`` and ``inf``.
    """
    if not radius > 0:
        raise ValueError(f"radius must be > 0, got {radius}")
    if max_neighbors is not None and int(max_neighbors) < 1:
        raise ValueError(f"max_neighbors must be >= 1 or None, got {max_neighbors}")
    q_len, s_len = check_inputs(query, support, query_lengths, support_lengths)
    mod = _MODULES[resolve_backend(backend, query.device)]
    radius = float(radius)
    cap = None if max_neighbors is None else int(max_neighbors)

    def search(q: Tensor, s: Tensor) -> tuple[Tensor, Tensor]:
        idx, d2, is_sorted = mod.radius(q, s, radius, cap)
        width = cap if cap is not None else idx.shape[1]
        return finalize(q, s, idx, d2, is_sorted, width, radius)

    return run_batched(query, support, q_len, s_len, search, cap)
