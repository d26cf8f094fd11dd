"""Transformer encoder and decoder layers with injected attention.

An attention module is anything called as ``attn(query, key, value, **kwargs) -> (out,
weights)`` — :class:`~pcreg.layers.attention.MultiHeadAttention` and
:class:`~pcreg.layers.attention.RelativePositionAttention` both are. The layer adds the
residual connections, normalisation (pre- or post-norm), feed-forward block and stochastic
depth around it. Shapes: ``x (B, N, C)``, ``memory (B, M, C)``.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from pcreg.layers.attention import MultiHeadAttention
from pcreg.layers.blocks import DropPath, Mlp

__all__ = ["TransformerDecoderLayer", "TransformerLayer"]


class TransformerLayer(nn.Module):
    """Attention + feed-forward, each in a residual branch.

    post-norm (Vaswani; GeoTransformer, DETR): ``x = norm(x + drop(branch(x)))``;
    pre-norm (ViT): ``x = x + drop_path(branch(norm(x)))``.

    Args:
        attention: the attention module (its width must be ``d_model``).
        d_model: ``C``. ffn_dim: hidden width of the feed-forward block (e.g. 4C, or 2C in
        GeoTransformer). dropout: on both branch outputs. drop_path: stochastic depth rate.
        norm_first: pre-norm when True. activation: feed-forward activation.
    """

    def __init__(
        self,
        attention: nn.Module,
        d_model: int,
        ffn_dim: int,
        dropout: float = 0.0,
        drop_path: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.attn = attention
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.ffn = Mlp(d_model, ffn_dim, d_model, activation=activation)
        self.drop1 = nn.Dropout(dropout)
        self.drop2 = nn.Dropout(dropout)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm_first = norm_first

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        need_weights: bool = False,
        **attn_kwargs: Any,
    ) -> tuple[Tensor, Tensor | None]:
        """Self-attention when ``memory`` is None, else cross-attention to ``memory``.

        Extra keyword arguments (``key_padding_mask``, ``query_pos``, ``key_pos``,
        ``pair_embedding`` ...) go to the attention module. Returns ``(x (B, N, C), weights)``.
        """
        if self.norm_first:
            h = self.norm1(x)
            kv = h if memory is None else memory
            a, w = self.attn(h, kv, kv, need_weights=need_weights, **attn_kwargs)
            x = x + self.drop_path(self.drop1(a))
            x = x + self.drop_path(self.drop2(self.ffn(self.norm2(x))))
        else:
            kv = x if memory is None else memory
            a, w = self.attn(x, kv, kv, need_weights=need_weights, **attn_kwargs)
            x = self.norm1(x + self.drop_path(self.drop1(a)))
            x = self.norm2(x + self.drop_path(self.drop2(self.ffn(x))))
        return x, w


class TransformerDecoderLayer(nn.Module):
    """Decoder layer (self-attention over queries, cross-attention to memory, feed-forward).

    DETR convention: ``query_pos`` is added to the queries' queries and keys in self-attention
    and to the queries in cross-attention; ``memory_pos`` to the memory keys; values never get
    positions. ``memory_key_padding_mask (B, M)`` True = pad.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        ffn_dim: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        fused: bool = True,
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout, fused=fused)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout, fused=fused)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.ffn = Mlp(d_model, ffn_dim, d_model, activation=activation)
        self.drop1, self.drop2, self.drop3 = (
            nn.Dropout(dropout),
            nn.Dropout(dropout),
            nn.Dropout(dropout),
        )
        self.norm_first = norm_first

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        query_pos: Tensor | None = None,
        memory_pos: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """tgt ``(B, Q, C)``, memory ``(B, M, C)``. Returns ``(tgt, cross weights or None)``."""
        pre = self.norm_first
        h = self.norm1(tgt) if pre else tgt
        a, _ = self.self_attn(h, h, h, query_pos=query_pos, key_pos=query_pos)
        tgt = tgt + self.drop1(a) if pre else self.norm1(tgt + self.drop1(a))
        h = self.norm2(tgt) if pre else tgt
        a, w = self.cross_attn(
            h,
            memory,
            memory,
            key_padding_mask=memory_key_padding_mask,
            query_pos=query_pos,
            key_pos=memory_pos,
            need_weights=need_weights,
        )
        tgt = tgt + self.drop2(a) if pre else self.norm2(tgt + self.drop2(a))
        h = self.norm3(tgt) if pre else tgt
        tgt = tgt + self.drop3(self.ffn(h)) if pre else self.norm3(tgt + self.drop3(self.ffn(h)))
        return tgt, w
