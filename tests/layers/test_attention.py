"""Attention core, MultiHeadAttention and RelativePositionAttention against explicit formulas
and torch.nn.MultiheadAttention."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from pcreg.layers import MultiHeadAttention, RelativePositionAttention, scaled_dot_product


def _qkv(gen, b=2, h=3, nq=5, nk=7, d=8, dtype=torch.float64):
    q = torch.randn(b, h, nq, d, generator=gen, dtype=dtype)
    k = torch.randn(b, h, nk, d, generator=gen, dtype=dtype)
    v = torch.randn(b, h, nk, d, generator=gen, dtype=dtype)
    return q, k, v


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_fused_equals_math_path_with_bias_and_padding(gen, dtype, tol):
    q, k, v = _qkv(gen, dtype=dtype)
    bias = torch.randn(2, 3, 5, 7, generator=gen, dtype=dtype)
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[0, 5:] = True
    fused, _ = scaled_dot_product(q, k, v, bias=bias, key_padding_mask=pad, fused=True)
    math_, w = scaled_dot_product(q, k, v, bias=bias, key_padding_mask=pad, fused=False)
    assert (fused - math_).abs().max() <= tol
    # and both equal the textbook formula
    scores = q @ k.transpose(-1, -2) / math.sqrt(8) + bias
    scores[0, :, :, 5:] = float("-inf")
    ref = torch.softmax(scores, -1) @ v
    assert (math_ - ref).abs().max() <= tol
    assert torch.allclose(w.sum(-1), torch.ones((), dtype=dtype))


def test_padded_keys_get_zero_weight_and_do_not_matter(gen):
    q, k, v = _qkv(gen)
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[1, [0, 3]] = True
    out, w = scaled_dot_product(q, k, v, key_padding_mask=pad, need_weights=True)
    assert torch.all(w[1, :, :, [0, 3]] == 0)
    assert torch.all(w[0] > 0)
    k2, v2 = k.clone(), v.clone()
    k2[1, :, [0, 3]] = 1e3 * torch.randn(3, 2, 8, generator=gen, dtype=torch.float64)
    v2[1, :, [0, 3]] = 1e3
    for fused in (True, False):
        out2, _ = scaled_dot_product(q, k2, v2, key_padding_mask=pad, fused=fused)
        assert torch.allclose(out, out2, atol=1e-12)


@pytest.mark.parametrize("fused", [True, False])
def test_fully_padded_rows_give_zeros_not_nan_forward_and_backward(gen, fused):
    q, k, v = _qkv(gen)
    q.requires_grad_(True)
    k.requires_grad_(True)
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[0] = True  # every key of item 0 is padding
    bias = torch.zeros(2, 1, 5, 7, dtype=torch.float64)
    bias[1, :, 2] = float("-inf")  # query row 2 of item 1 may see nothing
    out, _ = scaled_dot_product(q, k, v, bias=bias, key_padding_mask=pad, fused=fused)
    assert not torch.isnan(out).any()
    assert torch.all(out[0] == 0)
    assert torch.all(out[1, :, 2] == 0)
    assert torch.all(out[1, :, [0, 1, 3, 4]].abs().sum(-1) > 0)
    out.sum().backward()
    assert torch.isfinite(q.grad).all() and torch.isfinite(k.grad).all()
    assert torch.all(q.grad[0] == 0)


def test_bias_receives_gradients_on_fused_path(gen):
    q, k, v = _qkv(gen)
    bias = torch.randn(2, 3, 5, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    out, _ = scaled_dot_product(q, k, v, bias=bias, fused=True)
    (g_fused,) = torch.autograd.grad(out.square().sum(), bias)
    out, _ = scaled_dot_product(q, k, v, bias=bias, fused=False)
    (g_math,) = torch.autograd.grad(out.square().sum(), bias)
    assert (g_fused - g_math).abs().max() < 1e-10
    assert g_fused.abs().max() > 1e-3


@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("fused", [True, False])
def test_multihead_attention_equals_torch(gen, cross, fused):
    torch.manual_seed(0)
    c, h = 32, 4
    kdim = 24 if cross else None
    ref = nn.MultiheadAttention(c, h, batch_first=True, kdim=kdim, vdim=kdim)
    ours = MultiHeadAttention(c, h, kdim=kdim, vdim=kdim, fused=fused).load_from_torch(ref)
    x = torch.randn(3, 6, c, generator=gen)
    mem = torch.randn(3, 9, kdim or c, generator=gen) if cross else x
    pad = torch.zeros(3, mem.shape[1], dtype=torch.bool)
    pad[1, -2:] = True
    pad[2, :3] = True
    ref_out, ref_w = ref(x, mem, mem, key_padding_mask=pad, need_weights=True)
    out, _ = ours(x, mem, mem, key_padding_mask=pad)
    assert (out - ref_out).abs().max() <= 1e-5
    _, w = ours(x, mem, mem, key_padding_mask=pad, need_weights=True)
    assert (w.mean(1) - ref_w).abs().max() <= 1e-6  # torch averages heads by default


def test_positions_go_to_queries_and_keys_not_values(gen):
    mha = MultiHeadAttention(16, 2).eval()
    x = torch.randn(1, 4, 16, generator=gen)
    mem = torch.randn(1, 5, 16, generator=gen)
    qpos = torch.randn(1, 4, 16, generator=gen)
    kpos = torch.randn(1, 5, 16, generator=gen)
    out, _ = mha(x, mem, mem, query_pos=qpos, key_pos=kpos)
    expected, _ = mha(x + qpos, mem + kpos, mem)
    assert torch.allclose(out, expected, atol=1e-6)
    wrong, _ = mha(x + qpos, mem + kpos, mem + kpos)
    assert not torch.allclose(out, wrong, atol=1e-3)


def test_self_attention_is_permutation_equivariant(gen):
    mha = MultiHeadAttention(16, 4).double().eval()
    x = torch.randn(2, 9, 16, generator=gen, dtype=torch.float64)
    perm = torch.randperm(9, generator=gen)
    out, _ = mha(x, x, x)
    out_p, _ = mha(x[:, perm], x[:, perm], x[:, perm])
    assert torch.allclose(out[:, perm], out_p, atol=1e-12)


@pytest.mark.parametrize("fused", [True, False])
def test_relative_position_attention_equals_explicit_formula(gen, fused):
    torch.manual_seed(1)
    c, h, n, cp = 12, 3, 6, 10
    d = c // h
    rpe = RelativePositionAttention(c, h, pos_dim=cp, fused=fused).double().eval()
    x = torch.randn(2, n, c, generator=gen, dtype=torch.float64)
    g = torch.randn(2, n, n, cp, generator=gen, dtype=torch.float64)
    pad = torch.zeros(2, n, dtype=torch.bool)
    pad[1, -1] = True
    out, _ = rpe(x, x, x, g, key_padding_mask=pad)

    # e_ij = q_i (k_j + r_ij)^T / sqrt(d), per head, written out with plain loops
    q, k, v = rpe.q_proj(x), rpe.k_proj(x), rpe.v_proj(x)
    r = rpe.p_proj(g)
    expected = torch.zeros(2, n, c, dtype=torch.float64)
    for b in range(2):
        for head in range(h):
            sl = slice(head * d, (head + 1) * d)
            e = torch.empty(n, n, dtype=torch.float64)
            for i in range(n):
                for j in range(n):
                    e[i, j] = q[b, i, sl] @ (k[b, j, sl] + r[b, i, j, sl]) / math.sqrt(d)
            e[:, pad[b]] = float("-inf")
            expected[b, :, sl] = torch.softmax(e, -1) @ v[b, :, sl]
    expected = rpe.out_proj(expected)
    assert (out - expected).abs().max() < 1e-12


def test_relative_position_attention_uses_the_embedding(gen):
    rpe = RelativePositionAttention(8, 2).eval()
    x = torch.randn(1, 5, 8, generator=gen)
    g = torch.randn(1, 5, 5, 8, generator=gen)
    a, _ = rpe(x, x, x, g)
    b, _ = rpe(x, x, x, g + torch.randn(1, 5, 5, 8, generator=gen))
    assert (a - b).abs().max() > 1e-3


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)
    with pytest.raises(TypeError, match="bool"):
        scaled_dot_product(
            torch.zeros(1, 1, 2, 4),
            torch.zeros(1, 1, 3, 4),
            torch.zeros(1, 1, 3, 4),
            key_padding_mask=torch.zeros(1, 3),
        )


def test_relative_bias_by_query_projection_equals_projecting_every_pair(gen):
    """q_i·(W g_ij + b) computed as (Wᵀ q_i)·g_ij + q_i·b: same values and gradients."""
    rpe = RelativePositionAttention(12, 3, pos_dim=10).double()
    q = torch.randn(2, 3, 6, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    g = torch.randn(2, 6, 7, 10, generator=gen, dtype=torch.float64, requires_grad=True)
    fast = rpe.relative_bias(q, g)
    slow = rpe.relative_bias_reference(q, g)
    assert fast.shape == (2, 3, 6, 7) and slow.abs().max() > 0.1
    assert (fast - slow).abs().max() < 1e-12
    w = torch.randn(2, 3, 6, 7, generator=gen, dtype=torch.float64)
    grads_fast = torch.autograd.grad((fast * w).sum(), [q, g, rpe.p_proj.weight, rpe.p_proj.bias])
    grads_slow = torch.autograd.grad((slow * w).sum(), [q, g, rpe.p_proj.weight, rpe.p_proj.bias])
    for a, b in zip(grads_fast, grads_slow, strict=True):
        assert (a - b).abs().max() < 1e-12
