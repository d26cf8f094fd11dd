"""KeOps symbolic (lazy) tensors: the distance matrix is never stored, reductions run in a
JIT-compiled kernel (CUDA when the tensors are on a GPU, C++ on CPU). Each new formula (e.g. a
new ``k``) compiles once, about 5-15 s, into the KeOps cache folder (``KEOPS_CACHE_FOLDER``)."""

from __future__ import annotations

import importlib.util

import torch
from torch import Tensor

NAME = "keops"

INSTALL_HINT = "pip install pykeops (needs a C++ compiler; nvcc for CUDA)"


def is_available() -> bool:
    return importlib.util.find_spec("pykeops") is not None


def _lazy(q: Tensor, s: Tensor):
    try:
        import pykeops
        from pykeops.torch import LazyTensor
    except ImportError as exc:
        raise ImportError(f"the keops neighbor backend needs pykeops: {INSTALL_HINT}") from exc
    pykeops.set_verbose(False)  # KeOps prints compile chatter to stdout otherwise
    # Centre on the support so that coordinates stay small (precision far from the origin).
    center = s.mean(dim=0, keepdim=True)
    x_i = LazyTensor((q - center).contiguous()[:, None, :])  # (m, 1, 3)
    y_j = LazyTensor((s - center).contiguous()[None, :, :])  # (1, n, 3)
    return ((x_i - y_j) ** 2).sum(-1)  # (m, n) symbolic squared distances


def knn(q: Tensor, s: Tensor, k: int) -> tuple[Tensor, Tensor | None, bool]:
    d2 = _lazy(q, s)
    kk = min(k, s.shape[0])
    idx = d2.argKmin(kk, dim=1).reshape(q.shape[0], kk)
    return idx.long(), None, False


def radius(
    q: Tensor, s: Tensor, radius: float, cap: int | None
) -> tuple[Tensor, Tensor | None, bool]:
    d2 = _lazy(q, s)
    if cap is None:
        # Count the neighbors inside the radius in one reduction: step(r^2 - d^2) is 1 inside.
        inside = (radius * radius - d2).step()
        cap = int(inside.sum(dim=1).max())
        if cap == 0:
            return torch.full((q.shape[0], 0), -1, dtype=torch.long, device=q.device), None, True
    kk = min(cap, s.shape[0])
    idx = d2.argKmin(kk, dim=1).reshape(q.shape[0], kk)
    return idx.long(), None, False
