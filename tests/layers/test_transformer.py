"""Transformer layers, Mlp, DropPath and the cost counter."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from pcreg.layers import (
    DropPath,
    Mlp,
    MultiHeadAttention,
    RelativePositionAttention,
    TransformerDecoderLayer,
    TransformerLayer,
    attention_macs,
    count_parameters,
    layer_cost,
)


def test_post_norm_layer_matches_hand_written_composition(gen):
    attn = MultiHeadAttention(16, 4)
    layer = TransformerLayer(attn, 16, 32, norm_first=False).eval()
    x = torch.randn(2, 5, 16, generator=gen)
    out, _ = layer(x)
    a, _ = attn(x, x, x)
    h = layer.norm1(x + a)
    expected = layer.norm2(h + layer.ffn(h))
    assert torch.allclose(out, expected, atol=1e-6)


def test_pre_norm_layer_matches_hand_written_composition(gen):
    attn = MultiHeadAttention(16, 4)
    layer = TransformerLayer(attn, 16, 64, norm_first=True, activation="gelu").eval()
    x = torch.randn(2, 5, 16, generator=gen)
    out, _ = layer(x)
    n = layer.norm1(x)
    h = x + attn(n, n, n)[0]
    assert torch.allclose(out, h + layer.ffn(layer.norm2(h)), atol=1e-6)


def test_cross_layer_uses_memory_and_injected_relative_attention(gen):
    layer = TransformerLayer(MultiHeadAttention(8, 2), 8, 16).eval()
    x, m = torch.randn(1, 3, 8, generator=gen), torch.randn(1, 4, 8, generator=gen)
    a, _ = layer(x, m)
    b, _ = layer(x, m + 1)
    assert (a - b).abs().max() > 1e-3
    rpe_layer = TransformerLayer(RelativePositionAttention(8, 2), 8, 16).eval()
    g = torch.randn(1, 3, 3, 8, generator=gen)
    out, w = rpe_layer(x, pair_embedding=g, need_weights=True)
    assert out.shape == (1, 3, 8) and w.shape == (1, 2, 3, 3)


def test_layer_is_permutation_equivariant_and_ignores_padding(gen):
    layer = TransformerLayer(MultiHeadAttention(16, 4), 16, 32).double().eval()
    x = torch.randn(1, 7, 16, generator=gen, dtype=torch.float64)
    perm = torch.randperm(7, generator=gen)
    assert torch.allclose(layer(x)[0][:, perm], layer(x[:, perm])[0], atol=1e-12)
    pad = torch.zeros(1, 9, dtype=torch.bool)
    pad[0, 7:] = True
    xp = torch.cat([x, 50 * torch.randn(1, 2, 16, generator=gen, dtype=torch.float64)], 1)
    out, _ = layer(xp, key_padding_mask=pad)
    assert torch.allclose(out[:, :7], layer(x)[0], atol=1e-12)


def test_decoder_layer_ignores_padded_memory_and_learns(gen):
    dec = TransformerDecoderLayer(16, 4, 32).eval()
    tgt = torch.randn(2, 3, 16, generator=gen)
    mem = torch.randn(2, 6, 16, generator=gen)
    qpos, mpos = torch.randn(2, 3, 16, generator=gen), torch.randn(2, 6, 16, generator=gen)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[1, 4:] = True
    out, w = dec(tgt, mem, qpos, mpos, pad, need_weights=True)
    mem2 = mem.clone()
    mem2[1, 4:] = 99.0
    out2, _ = dec(tgt, mem2, qpos, mpos, pad)
    assert torch.allclose(out, out2, atol=1e-6)
    assert torch.all(w[1, :, :, 4:] == 0)
    out.sum().backward()
    assert all(p.grad is not None for p in dec.parameters())


def test_mlp_and_box_head_shapes_and_values(gen):
    mlp = Mlp(4, 8, 2, num_layers=3, activation="relu")
    x = torch.randn(5, 4, generator=gen)
    h = torch.relu(mlp.layers[1](torch.relu(mlp.layers[0](x))))
    assert torch.allclose(mlp(x), mlp.layers[2](h))
    with pytest.raises(ValueError, match="unknown activation"):
        Mlp(4, activation="swish2")


def test_drop_path():
    x = torch.ones(4000, 3)
    dp = DropPath(0.25, generator=torch.Generator().manual_seed(0))
    dp.eval()
    assert torch.equal(dp(x), x)
    dp.train()
    y = dp(x)
    rows = y[:, 0]
    assert torch.all((rows == 0) | torch.isclose(rows, torch.tensor(1 / 0.75)))
    assert torch.all(y == y[:, :1])  # whole samples are dropped
    assert abs((rows == 0).float().mean().item() - 0.25) < 0.03
    assert abs(y.mean().item() - 1.0) < 0.05
    with pytest.raises(ValueError):
        DropPath(1.0)


def _measured_macs(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops() // 2


@pytest.mark.parametrize("m", [None, 11])
def test_attention_macs_match_the_flop_counter(gen, m):
    n, d = 7, 24
    mha = MultiHeadAttention(d, 4, fused=False, bias=False)
    x = torch.randn(1, n, d, generator=gen)
    mem = x if m is None else torch.randn(1, m, d, generator=gen)
    measured = _measured_macs(lambda: mha(x, mem, mem))
    assert measured == attention_macs(n, d, m)
    assert attention_macs(n, d) == 4 * n * d * d + 2 * n * n * d
    assert layer_cost(mha, n, m).attention_macs == measured


def test_relative_attention_and_layer_costs(gen):
    n, d, cp = 6, 16, 8
    rpe = RelativePositionAttention(d, 2, pos_dim=cp, fused=False)
    x, g = torch.randn(1, n, d, generator=gen), torch.randn(1, n, n, cp, generator=gen)
    measured = _measured_macs(lambda: rpe(x, x, x, g))
    assert measured == attention_macs(n, d, pos_dim=cp, heads=2)
    layer = TransformerLayer(MultiHeadAttention(d, 2, fused=False), d, 3 * d)
    cost = layer_cost(layer, n)
    assert cost.ffn_macs == 2 * n * d * 3 * d
    assert cost.total_macs == _measured_macs(lambda: layer(x))
    assert (
        cost.parameters
        == count_parameters(layer)
        == 4 * (d * d + d) + 2 * 2 * d + (d * 3 * d + 3 * d + 3 * d * d + d)
    )
