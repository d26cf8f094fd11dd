"""Attention core and multi-head attention modules shared by every transformer in pcreg.

Shapes are batch-first throughout: ``B`` batch, ``H`` heads, ``Nq`` queries, ``Nk`` keys,
``C`` model width, ``D = C / H`` head width. The only place padding is expressed as
``key_padding_mask`` (True = pad) is this module's boundary (DESIGN §2); it is turned into an
additive ``-inf`` bias once. A query row whose keys are all padded returns zeros (never NaN) in
both the forward and the backward pass, on both the fused and the math path.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "MultiHeadAttention",
    "RelativePositionAttention",
    "padding_bias",
    "scaled_dot_product",
]


def padding_bias(key_padding_mask: Tensor, dtype: torch.dtype) -> Tensor:
    """``(B, Nk)`` bool (True = pad) -> additive bias ``(B, 1, 1, Nk)`` of 0 / -inf."""
    if key_padding_mask.dtype != torch.bool:
        raise TypeError(f"key_padding_mask must be bool (True = pad), got {key_padding_mask.dtype}")
    bias = torch.zeros(key_padding_mask.shape, dtype=dtype, device=key_padding_mask.device)
    return bias.masked_fill(key_padding_mask, float("-inf"))[:, None, None, :]


def scaled_dot_product(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    fused: bool = True,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """softmax(q kᵀ / sqrt(D) + bias) v, per head.

    Args:
        q: ``(B, H, Nq, D)``; k: ``(B, H, Nk, D)``; v: ``(B, H, Nk, Dv)``.
        bias: additive score bias broadcastable to ``(B, H, Nq, Nk)`` (may carry gradients;
            ``-inf`` entries mask keys).
        key_padding_mask: ``(B, Nk)`` bool, True = padded key (gets exactly zero weight).
        dropout_p: dropout on the attention weights (apply only in training).
        fused: use ``torch.nn.functional.scaled_dot_product_attention``; the math path computes
            the same thing explicitly. Weights are only available from the math path, so
            ``need_weights=True`` forces it.

    Returns:
        ``(out (B, H, Nq, Dv), weights (B, H, Nq, Nk) or None)``. Rows with no valid key give
        zeros in ``out`` and in ``weights``.
    """
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"q, k, v must be (B, H, N, D); got {tuple(q.shape)}, {tuple(k.shape)}")
    if key_padding_mask is not None:
        pad = padding_bias(key_padding_mask, q.dtype)
        bias = pad if bias is None else bias + pad
    empty_rows = None
    if bias is not None:
        bias = bias.to(q.dtype)
        # Rows whose every key is masked would produce NaN (0/0) in softmax and in its
        # gradient. Unmask them for the computation and zero their output afterwards.
        dead = torch.isneginf(bias).all(dim=-1, keepdim=True)  # (.., Nq, 1)
        if bool(dead.any()):
            empty_rows = dead
            bias = bias.masked_fill(dead, 0.0)
    if fused and not need_weights:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout_p)
        weights = None
    else:
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if bias is not None:
            scores = scores + bias
        weights = torch.softmax(scores, dim=-1)
        if empty_rows is not None:
            weights = weights.masked_fill(empty_rows, 0.0)
        dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
        out = torch.matmul(dropped, v)
    if empty_rows is not None:
        out = out.masked_fill(empty_rows, 0.0)
    return out, weights


def _split_heads(x: Tensor, num_heads: int) -> Tensor:
    b, n, c = x.shape
    return x.view(b, n, num_heads, c // num_heads).transpose(1, 2)


def _merge_heads(x: Tensor) -> Tensor:
    b, h, n, d = x.shape
    return x.transpose(1, 2).reshape(b, n, h * d)


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al., 2017), self or cross, batch-first.

    Separate ``q_proj``/``k_proj``/``v_proj``/``out_proj`` linears (the same parameters as
    ``torch.nn.MultiheadAttention``'s packed ``in_proj``; see :meth:`load_from_torch`).
    Positions (DETR) are added to queries and keys, never to values.

    Args:
        embed_dim: model width ``C``; must be divisible by ``num_heads``.
        num_heads: ``H``.
        dropout: dropout on attention weights (training only).
        bias: linear biases.
        kdim, vdim: widths of keys / values when they differ from ``C`` (cross-attention).
        fused: prefer ``scaled_dot_product_attention``.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        kdim: int | None = None,
        vdim: int | None = None,
        fused: bool = True,
    ) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.embed_dim, self.num_heads, self.dropout, self.fused = (
            embed_dim,
            num_heads,
            dropout,
            fused,
        )
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(kdim or embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(vdim or embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        attn_bias: Tensor | None = None,
        query_pos: Tensor | None = None,
        key_pos: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """query ``(B, Nq, C)``, key ``(B, Nk, Ck)``, value ``(B, Nk, Cv)``; positions shaped
        like query / key; ``key_padding_mask (B, Nk)`` True = pad; ``attn_bias`` broadcastable
        to ``(B, H, Nq, Nk)``. Returns ``(out (B, Nq, C), weights (B, H, Nq, Nk) or None)``."""
        q_in = query if query_pos is None else query + query_pos
        k_in = key if key_pos is None else key + key_pos
        q = _split_heads(self.q_proj(q_in), self.num_heads)
        k = _split_heads(self.k_proj(k_in), self.num_heads)
        v = _split_heads(self.v_proj(value), self.num_heads)
        out, weights = scaled_dot_product(
            q,
            k,
            v,
            bias=attn_bias,
            key_padding_mask=key_padding_mask,
            dropout_p=self.dropout if self.training else 0.0,
            fused=self.fused,
            need_weights=need_weights,
        )
        return self.out_proj(_merge_heads(out)), weights

    @torch.no_grad()
    def load_from_torch(self, other: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of a ``torch.nn.MultiheadAttention`` with the same sizes."""
        c = self.embed_dim
        if other._qkv_same_embed_dim:
            w = other.in_proj_weight
            self.q_proj.weight.copy_(w[:c]), self.k_proj.weight.copy_(w[c : 2 * c])
            self.v_proj.weight.copy_(w[2 * c :])
        else:
            self.q_proj.weight.copy_(other.q_proj_weight)
            self.k_proj.weight.copy_(other.k_proj_weight)
            self.v_proj.weight.copy_(other.v_proj_weight)
        if other.in_proj_bias is not None:
            b = other.in_proj_bias
            self.q_proj.bias.copy_(b[:c]), self.k_proj.bias.copy_(b[c : 2 * c])
            self.v_proj.bias.copy_(b[2 * c :])
        self.out_proj.load_state_dict(other.out_proj.state_dict())
        return self


class RelativePositionAttention(MultiHeadAttention):
    """GeoTransformer's geometric self-attention (Qin et al., CVPR 2022, Eq. 2).

    e_ij = q_i (k_j + r_ij)ᵀ / sqrt(D), with q = x W_q, k = x W_k and r_ij = g_ij W_p a
    projection of the pair embedding g_ij. The term q_i r_ijᵀ enters the attention core as an
    additive per-head bias, so the fused kernel still does the softmax and the value sum.
    Values carry no relative term (as in the paper).

    The bias is computed without projecting the ``(B, Nq, Nk, Cp)`` pair embedding: with
    ``W_p`` split per head, q_i·(W_p g_ij + b) = (W_pᵀ q_i)·g_ij + q_i·b, i.e. ``Nq`` projections
    of width ``Cp`` per head instead of ``Nq Nk`` of width ``C`` — C/H times fewer multiplies
    and no ``(B, Nq, Nk, C)`` temporary (:meth:`relative_bias`; the formula as written is
    :meth:`relative_bias_reference`).

    Args:
        embed_dim: ``C``. num_heads: ``H``. dropout: on attention weights.
        pos_dim: width of the pair embedding (defaults to ``C``).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        pos_dim: int | None = None,
        fused: bool = True,
    ) -> None:
        super().__init__(embed_dim, num_heads, dropout, fused=fused)
        self.p_proj = nn.Linear(pos_dim or embed_dim, embed_dim)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        pair_embedding: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """query ``(B, Nq, C)``, key/value ``(B, Nk, C)``, pair_embedding ``(B, Nq, Nk, Cp)``,
        ``key_padding_mask (B, Nk)`` True = pad. Returns ``(out (B, Nq, C), weights)``."""
        h = self.num_heads
        q = _split_heads(self.q_proj(query), h)  # (B, H, Nq, D)
        k = _split_heads(self.k_proj(key), h)
        v = _split_heads(self.v_proj(value), h)
        bias = self.relative_bias(q, pair_embedding)
        out, weights = scaled_dot_product(
            q,
            k,
            v,
            bias=bias,
            key_padding_mask=key_padding_mask,
            dropout_p=self.dropout if self.training else 0.0,
            fused=self.fused,
            need_weights=need_weights,
        )
        return self.out_proj(_merge_heads(out)), weights

    def relative_bias(self, q: Tensor, pair_embedding: Tensor) -> Tensor:
        """q_i r_ijᵀ / sqrt(D) per head: q ``(B, H, Nq, D)``, pair_embedding
        ``(B, Nq, Nk, Cp)`` -> ``(B, H, Nq, Nk)``."""
        b, h, nq, d = q.shape
        nk, cp = pair_embedding.shape[2], pair_embedding.shape[3]
        w = self.p_proj.weight.view(h, d, cp)
        u = torch.einsum("bhnd,hdc->bnhc", q, w).reshape(b * nq, h, cp)
        g = pair_embedding.reshape(b * nq, nk, cp)
        bias = torch.bmm(u, g.transpose(1, 2)).view(b, nq, h, nk).transpose(1, 2)
        if self.p_proj.bias is not None:
            bias = bias + torch.einsum("bhnd,hd->bhn", q, self.p_proj.bias.view(h, d))[..., None]
        return bias / math.sqrt(d)

    def relative_bias_reference(self, q: Tensor, pair_embedding: Tensor) -> Tensor:
        """:meth:`relative_bias` as the paper writes it: project every pair, then dot."""
        b, h, nq, _ = q.shape
        nk = pair_embedding.shape[2]
        r = self.p_proj(pair_embedding).view(b, nq, nk, h, -1)  # (B, Nq, Nk, H, D)
        return torch.einsum("bhnd,bnmhd->bhnm", q, r) / math.sqrt(q.shape[-1])
