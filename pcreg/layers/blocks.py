"""Feed-forward blocks: ``Mlp`` and stochastic depth (``DropPath``)."""

from __future__ import annotations

import itertools

import torch
from torch import Tensor, nn

__all__ = ["DropPath", "Mlp", "make_activation"]

_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "leaky_relu": nn.LeakyReLU, "silu": nn.SiLU}


def make_activation(name: str) -> nn.Module:
    """``"relu" | "gelu" | "leaky_relu" | "silu"`` -> a fresh module."""
    try:
        return _ACTIVATIONS[name]()
    except KeyError:
        raise ValueError(
            f"unknown activation {name!r}; choose from {sorted(_ACTIVATIONS)}"
        ) from None


class Mlp(nn.Module):
    """``num_layers`` linear layers with an activation (and dropout) between them.

    ``Mlp(C, 4C)`` is the transformer feed-forward block (Linear-act-drop-Linear-drop);
    ``Mlp(C, C, 4, num_layers=3, activation="relu")`` is DETR's box head.
    Works on any leading shape: ``(..., in_features) -> (..., out_features)``.
    """

    def __init__(
        self,
        in_features: int,
        hidden_features: int | None = None,
        out_features: int | None = None,
        num_layers: int = 2,
        activation: str = "gelu",
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        hidden = hidden_features or in_features
        out = out_features or in_features
        dims = [in_features] + [hidden] * (num_layers - 1) + [out]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(dims))
        self.act = make_activation(activation)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = self.act(x)
            x = self.drop(x)
        return x


class DropPath(nn.Module):
    """Stochastic depth (Huang et al., 2016): drop a whole residual branch per sample.

    In training each sample's branch is zeroed with probability ``p`` and survivors are
    scaled by ``1 / (1 - p)`` so the expectation is unchanged; identity in eval mode.
    ``generator`` (optional) makes the drop pattern reproducible.
    """

    def __init__(self, p: float = 0.0, generator: torch.Generator | None = None) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"drop-path probability must be in [0, 1), got {p}")
        self.p = p
        self.generator = generator

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = 1.0 - self.p
        shape = (x.shape[0],) + (1,) * (x.dim() - 1)
        gen = self.generator
        device = gen.device if gen is not None else x.device
        noise = torch.rand(shape, generator=gen, device=device, dtype=x.dtype)
        mask = (noise.to(x.device) < keep).to(x.dtype)
        return x * mask / keep

    def extra_repr(self) -> str:
        return f"p={self.p}"
