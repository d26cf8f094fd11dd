"""Positional encodings: 1-D sinusoidal, 2-D sine for images (with padding), learned."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "LearnedPositionEmbedding",
    "SinusoidalEncoding",
    "sine_encoding_2d",
    "sinusoidal_encoding",
    "sinusoidal_linear",
]


def sinusoidal_encoding(positions: Tensor, dim: int, temperature: float = 10000.0) -> Tensor:
    """Vaswani et al. (2017): PE(p, 2i) = sin(p / T^(2i/d)), PE(p, 2i+1) = cos(p / T^(2i/d)).

    Args:
        positions: any shape ``(...)``, float (positions need not be integers: GeoTransformer
            feeds scaled distances and angles).
        dim: even encoding width ``d``.
    Returns:
        ``(..., dim)`` in the dtype of ``positions`` (float32 for integer input), sin and cos
        interleaved as in the formula.
    """
    if dim % 2:
        raise ValueError(f"sinusoidal encoding width must be even, got {dim}")
    if not positions.is_floating_point():
        positions = positions.float()
    angles = positions[..., None] * _inverse_frequencies(dim, temperature, positions)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)


def _inverse_frequencies(dim: int, temperature: float, like: Tensor) -> Tensor:
    """``T^(-2i/d)`` for i < d/2, ``(d/2,)`` on the device / dtype of ``like``."""
    i2 = torch.arange(0, dim, 2, device=like.device, dtype=like.dtype)
    return torch.exp(-math.log(temperature) * i2 / dim)


def sinusoidal_linear(positions: Tensor, linear: nn.Linear, temperature: float = 10000.0) -> Tensor:
    """``linear(sinusoidal_encoding(positions, linear.in_features))`` without building the
    interleaved ``(..., d)`` encoding: the sin and cos halves each meet their own columns of the
    weight (two GEMMs of depth d/2). Same value up to float rounding; for the big pair
    embeddings of the geometric transformer the skipped interleave copy is a third of the time.

    Args:
        positions: float ``(...)``. linear: ``nn.Linear`` whose ``in_features`` is even.
    Returns:
        ``(..., linear.out_features)``.
    """
    dim = linear.in_features
    if dim % 2:
        raise ValueError(f"sinusoidal encoding width must be even, got {dim}")
    if not positions.is_floating_point():
        positions = positions.float()
    angles = positions[..., None] * _inverse_frequencies(dim, temperature, positions)
    out = F.linear(angles.sin(), linear.weight[:, 0::2], linear.bias)
    return out + F.linear(angles.cos(), linear.weight[:, 1::2])


class SinusoidalEncoding(nn.Module):
    """Module form of :func:`sinusoidal_encoding` (no parameters)."""

    def __init__(self, dim: int, temperature: float = 10000.0) -> None:
        super().__init__()
        if dim % 2:
            raise ValueError(f"sinusoidal encoding width must be even, got {dim}")
        self.dim, self.temperature = dim, temperature

    def forward(self, positions: Tensor) -> Tensor:
        return sinusoidal_encoding(positions, self.dim, self.temperature)


def sine_encoding_2d(
    valid: Tensor,
    dim: int,
    temperature: float = 10000.0,
    normalize: bool = True,
    scale: float = 2 * math.pi,
) -> Tensor:
    """2-D sine positional encoding for padded image batches (DETR's ``PositionEmbeddingSine``).

    Positions are cumulative counts of valid pixels along each axis, so padding at the right /
    bottom does not shift the encoding of real pixels; with ``normalize`` they are scaled to
    ``(0, scale]`` by each image's own valid height / width.

    Args:
        valid: ``(B, H, W)`` bool, True = real pixel.
        dim: output channels ``C`` (divisible by 4): the first ``C/2`` encode y, the rest x.
    Returns:
        ``(B, C, H, W)`` float32; zeros are not forced at padded pixels (mask them downstream).
    """
    if dim % 4:
        raise ValueError(f"2-D sine encoding width must be divisible by 4, got {dim}")
    v = valid.to(torch.float32)
    y = v.cumsum(1)
    x = v.cumsum(2)
    if normalize:
        eps = 1e-6
        y = y / (y[:, -1:, :] + eps) * scale
        x = x / (x[:, :, -1:] + eps) * scale
    half = dim // 2
    pos_y = sinusoidal_encoding(y, half, temperature)  # (B, H, W, C/2)
    pos_x = sinusoidal_encoding(x, half, temperature)
    return torch.cat([pos_y, pos_x], dim=-1).permute(0, 3, 1, 2)


class LearnedPositionEmbedding(nn.Module):
    """A learned table of ``num_positions`` embeddings of width ``dim`` (truncated normal,
    std 0.02, as in ViT). ``forward(n)`` returns ``(1, n, dim)``; ``forward()`` the whole table."""

    def __init__(self, num_positions: int, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(1, num_positions, dim))
        nn.init.trunc_normal_(self.weight, std=0.02)

    def forward(self, n: int | None = None) -> Tensor:
        if n is None:
            return self.weight
        if n > self.weight.shape[1]:
            raise ValueError(f"asked for {n} positions, the table has {self.weight.shape[1]}")
        return self.weight[:, :n]
