"""Parameter and multiply-add counts for attention layers (analytic, checked against
``torch.utils.flop_counter`` in the tests)."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from pcreg.layers.attention import MultiHeadAttention, RelativePositionAttention
from pcreg.layers.transformer import TransformerLayer

__all__ = ["LayerCost", "attention_macs", "count_parameters", "layer_cost"]


def count_parameters(module: nn.Module, trainable_only: bool = False) -> int:
    """Number of scalar parameters (shared tensors counted once)."""
    seen: set[int] = set()
    total = 0
    for p in module.parameters():
        if id(p) in seen or (trainable_only and not p.requires_grad):
            continue
        seen.add(id(p))
        total += p.numel()
    return total


def attention_macs(
    n: int, d: int, m: int | None = None, pos_dim: int | None = None, heads: int = 1
) -> int:
    """Multiply-adds of one multi-head attention over ``n`` queries and ``m`` keys (``m = n``
    for self-attention) at width ``d``.

    projections q, out: ``2 n d²``; k, v: ``2 m d²``; scores q kᵀ and the weighted value sum:
    ``2 n m d``. For self-attention that is the familiar ``4 n d² + 2 n² d``. With a relative
    pair embedding of width ``pos_dim`` (GeoTransformer) over ``heads`` heads, add the q·r term
    as :class:`~pcreg.layers.RelativePositionAttention` computes it: ``n d pos_dim`` to take
    each query back through the pair projection, ``n m heads pos_dim`` for its dot products
    with the pair embeddings, ``n d`` for the projection's bias (projecting every pair first
    would cost ``n m pos_dim d``). Other biases, softmax and normalisation are not counted.
    """
    m = n if m is None else m
    macs = 2 * n * d * d + 2 * m * d * d + 2 * n * m * d
    if pos_dim is not None:
        macs += n * d * pos_dim + n * m * heads * pos_dim + n * d
    return macs


@dataclass(frozen=True)
class LayerCost:
    """Costs of one layer for a given sequence length (multiply-adds, not FLOPs: 1 MAC = 2
    FLOPs)."""

    parameters: int
    attention_macs: int
    ffn_macs: int

    @property
    def total_macs(self) -> int:
        return self.attention_macs + self.ffn_macs


def layer_cost(layer: nn.Module, n: int, m: int | None = None) -> LayerCost:
    """Parameters and multiply-adds of a :class:`TransformerLayer`, or of a bare attention
    module, for ``n`` queries attending to ``m`` keys (``None``: self-attention)."""
    attn = layer.attn if isinstance(layer, TransformerLayer) else layer
    if isinstance(attn, RelativePositionAttention):
        d = attn.embed_dim
        a = attention_macs(n, d, m, pos_dim=attn.p_proj.in_features, heads=attn.num_heads)
    elif isinstance(attn, MultiHeadAttention):
        d = attn.embed_dim
        kd, vd = attn.k_proj.in_features, attn.v_proj.in_features
        mm = n if m is None else m
        a = 2 * n * d * d + mm * kd * d + mm * vd * d + 2 * n * mm * d
    else:
        raise TypeError(f"layer_cost does not know {type(attn).__name__}")
    ffn = 0
    if isinstance(layer, TransformerLayer):
        ffn = n * sum(lin.in_features * lin.out_features for lin in layer.ffn.layers)
    return LayerCost(count_parameters(layer), a, ffn)
