"""Packed (ragged) <-> padded batch conversions.

Packed: items concatenated along dim 0, ``x (ΣN, C)`` with ``lengths (B,)`` (the backbone's
layout). Padded: ``(B, L, C)`` with ``valid (B, L)`` (True = real row; the transformer's layout).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["lengths_to_offsets", "packed_batch_index", "packed_to_padded", "padded_to_packed"]


def lengths_to_offsets(lengths: Tensor) -> Tensor:
    """``lengths (B,)`` -> ``offsets (B + 1,)`` int64: ``offsets[0] = 0``, ``offsets[-1] = ΣN``."""
    offsets = lengths.new_zeros(lengths.numel() + 1, dtype=torch.long)
    offsets[1:] = torch.cumsum(lengths.to(torch.long), dim=0)
    return offsets


def packed_batch_index(lengths: Tensor) -> Tensor:
    """Batch item of every packed row: ``lengths (B,)`` -> ``(ΣN,)`` int64."""
    return torch.repeat_interleave(
        torch.arange(lengths.numel(), device=lengths.device), lengths.to(torch.long)
    )


def packed_to_padded(x: Tensor, lengths: Tensor, pad_value: float = 0.0) -> tuple[Tensor, Tensor]:
    """``x (ΣN, ...)`` -> ``padded (B, L, ...)`` with ``L = max(lengths)``, and ``valid (B, L)``."""
    batch = lengths.numel()
    max_len = int(lengths.max()) if batch else 0
    valid = torch.arange(max_len, device=x.device)[None, :] < lengths.to(x.device)[:, None]
    padded = x.new_full((batch, max_len, *x.shape[1:]), pad_value)
    padded[valid] = x
    return padded, valid


def padded_to_packed(padded: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
    """Inverse of :func:`packed_to_padded`: returns ``(x (ΣN, ...), lengths (B,))``."""
    return padded[valid], valid.sum(dim=1)
