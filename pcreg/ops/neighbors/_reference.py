"""Exact O(M·N) oracle: float64 direct differences and a full stable sort. For tests only."""

from __future__ import annotations

import torch
from torch import Tensor

NAME = "reference"

INSTALL_HINT = "part of pcreg"


def is_available() -> bool:
    return True


def _sqdist(q: Tensor, s: Tensor) -> Tensor:
    return (q.double().unsqueeze(1) - s.double().unsqueeze(0)).square().sum(-1)  # (m, n)


def knn(q: Tensor, s: Tensor, k: int) -> tuple[Tensor, Tensor | None, bool]:
    d2 = _sqdist(q, s)
    d2, order = torch.sort(d2, dim=1, stable=True)
    return order[:, :k], d2[:, :k], True


def radius(
    q: Tensor, s: Tensor, radius: float, cap: int | None
) -> tuple[Tensor, Tensor | None, bool]:
    d2 = _sqdist(q, s)
    d2, order = torch.sort(d2, dim=1, stable=True)
    inside = d2 <= radius * radius
    width = int(inside.sum(1).max()) if cap is None else min(cap, s.shape[0])
    order = order[:, :width].masked_fill(~inside[:, :width], -1)
    return order, d2[:, :width], True
