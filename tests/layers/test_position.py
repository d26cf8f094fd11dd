"""Positional encodings against their formulas."""

from __future__ import annotations

import math

import pytest
import torch

from pcreg.layers import (
    LearnedPositionEmbedding,
    SinusoidalEncoding,
    sine_encoding_2d,
    sinusoidal_encoding,
)


def test_sinusoidal_matches_the_formula():
    d = 16
    pos = torch.tensor([0.0, 1.0, 7.0, 123.5, 2048.0], dtype=torch.float64)
    pe = sinusoidal_encoding(pos, d)
    assert pe.shape == (5, d)
    for a, p in enumerate(pos.tolist()):
        for i in range(d // 2):
            w = p / 10000 ** (2 * i / d)
            assert pe[a, 2 * i].item() == pytest.approx(math.sin(w), abs=1e-12)
            assert pe[a, 2 * i + 1].item() == pytest.approx(math.cos(w), abs=1e-12)


def test_sinusoidal_keeps_leading_shape_and_module_agrees():
    pos = torch.rand(2, 3, 4) * 10
    assert torch.equal(SinusoidalEncoding(8)(pos), sinusoidal_encoding(pos, 8))
    assert sinusoidal_encoding(pos, 8).shape == (2, 3, 4, 8)
    assert sinusoidal_encoding(torch.arange(5), 4).dtype == torch.float32
    with pytest.raises(ValueError, match="even"):
        sinusoidal_encoding(pos, 7)


def test_sine_2d_ignores_padding_of_other_images():
    valid = torch.zeros(2, 6, 9, dtype=torch.bool)
    valid[0] = True
    valid[1, :4, :5] = True  # a 4x5 image padded to 6x9
    pe = sine_encoding_2d(valid, 32)
    alone = sine_encoding_2d(torch.ones(1, 4, 5, dtype=torch.bool), 32)
    assert pe.shape == (2, 32, 6, 9)
    assert torch.allclose(pe[1, :, :4, :5], alone[0], atol=1e-6)
    # first half encodes y only, second half x only
    assert torch.allclose(pe[0, :16, :, 0:1].expand(-1, -1, 9), pe[0, :16])
    assert torch.allclose(pe[0, 16:, 0:1, :].expand(-1, 6, -1), pe[0, 16:])
    # normalised: the last valid row/column sits at 2*pi
    y_last = sinusoidal_encoding(torch.tensor(2 * math.pi), 16)
    assert torch.allclose(pe[1, :16, 3, 0], y_last, atol=1e-5)


def test_learned_embedding():
    emb = LearnedPositionEmbedding(10, 4)
    assert emb().shape == (1, 10, 4)
    assert torch.equal(emb(3), emb.weight[:, :3])
    assert emb.weight.std() < 0.05
    with pytest.raises(ValueError, match="11 positions"):
        emb(11)


def test_sinusoidal_linear_equals_linear_of_the_encoding(gen):
    from torch import nn

    from pcreg.layers import sinusoidal_linear

    lin = nn.Linear(16, 5).double()
    x = torch.rand(3, 4, 2, generator=gen, dtype=torch.float64) * 20
    expected = lin(sinusoidal_encoding(x, 16))
    assert (sinusoidal_linear(x, lin) - expected).abs().max() < 1e-12
    with pytest.raises(ValueError, match="even"):
        sinusoidal_linear(x, nn.Linear(15, 5))
