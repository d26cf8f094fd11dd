"""KPConv: kernel dispositions, the convolution against its formula, per-item group norm,
and the FPN on packed batches."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pcreg.models.backbones.kpconv.blocks import PackedGroupNorm, maxpool, nearest_upsample
from pcreg.models.backbones.kpconv.conv import KPConv
from pcreg.models.backbones.kpconv.fpn import KPConvFPN
from pcreg.models.backbones.kpconv.kernel_points import (
    generate_kernel_points,
    kernel_energy,
    kernel_points,
)
from pcreg.ops.pyramid import build_pyramid


def test_cached_disposition_is_a_converged_centre_fixed_kernel():
    kp = kernel_points(15).astype(np.float64)
    assert kp.shape == (15, 3)
    assert np.all(kp[0] == 0)
    radii = np.linalg.norm(kp[1:], axis=1)
    assert radii.mean() == pytest.approx(0.66, abs=1e-6)
    assert radii.std() < 0.02  # the 14 moving points settle on a shell
    d = np.linalg.norm(kp[:, None] - kp[None], axis=-1) + np.eye(15) * 9
    assert d.min() > 0.5  # well spread
    # a random disposition with the same scale has higher energy
    rng = np.random.default_rng(0)
    rand = rng.normal(size=(15, 3))
    rand[0] = 0
    rand *= 0.66 / np.linalg.norm(rand[1:], axis=1).mean()
    assert kernel_energy(kp) < kernel_energy(rand)


def test_generation_is_deterministic_by_seed():
    a = generate_kernel_points(6, num_starts=2, steps=300, seed=3)
    b = generate_kernel_points(6, num_starts=2, steps=300, seed=3)
    assert np.array_equal(a, b)


def test_kpconv_matches_the_formula(gen):
    torch.manual_seed(0)
    conv = KPConv(4, 5, 15, radius=0.3, sigma=0.25).double()
    s_pts = torch.rand(20, 3, generator=gen, dtype=torch.float64)
    q_pts = torch.rand(6, 3, generator=gen, dtype=torch.float64)
    feats = torch.randn(20, 4, generator=gen, dtype=torch.float64)
    idx = torch.randint(0, 20, (6, 7), generator=gen)
    idx[0, 3:] = 20  # shadow padding
    idx[5, :] = 20  # a query with no neighbor at all
    out = conv(feats, q_pts, s_pts, idx)
    expected = torch.zeros(6, 5, dtype=torch.float64)
    for m in range(6):
        real = [j for j in idx[m].tolist() if j < 20]
        acc = torch.zeros(5, dtype=torch.float64)
        for j in real:
            for k in range(15):
                h = max(
                    0.0, 1 - torch.linalg.norm(s_pts[j] - q_pts[m] - conv.kernel_points[k]) / 0.25
                )
                acc += h * feats[j] @ conv.weights[k]
        expected[m] = acc / max(len(real), 1) + conv.bias
    assert torch.allclose(out, expected, atol=1e-10)
    assert torch.allclose(out[5], conv.bias)


def test_packed_group_norm_equals_torch_group_norm_per_item(gen):
    norm = PackedGroupNorm(4, 8)
    torch.nn.init.normal_(norm.weight)
    torch.nn.init.normal_(norm.bias)
    ref = torch.nn.GroupNorm(4, 8)
    ref.load_state_dict(norm.state_dict())
    lengths = torch.tensor([5, 9, 2])
    x = torch.randn(16, 8, generator=gen) * 3 + 1
    out = norm(x, lengths)
    for a, b in ((0, 5), (5, 14), (14, 16)):
        expected = ref(x[a:b].T[None])[0].T
        assert torch.allclose(out[a:b], expected, atol=1e-5)


def test_pooling_and_upsampling_read_the_shadow_row_as_zero():
    feats = torch.tensor([[1.0, -2.0], [3.0, -1.0]])
    idx = torch.tensor([[0, 1], [1, 2], [2, 2]])
    assert torch.equal(maxpool(feats, idx), torch.tensor([[3.0, -1.0], [3.0, 0.0], [0.0, 0.0]]))
    assert torch.equal(
        nearest_upsample(feats, idx), torch.tensor([[1.0, -2.0], [3.0, -1.0], [0.0, 0.0]])
    )


def _cloud(gen, n, offset):
    return torch.rand(n, 3, generator=gen) * torch.tensor([2.0, 2.0, 0.5]) + offset


def test_fpn_on_a_batch_equals_single_items(gen):
    torch.manual_seed(0)
    fpn = KPConvFPN(1, 32, 8, 15, 0.25, 0.2, 4, num_stages=3).eval()
    clouds = [_cloud(gen, 600, 0.0), _cloud(gen, 450, 5.0)]
    kw = dict(
        num_stages=3, voxel_size=0.1, radius=0.25, neighbor_limits=[20, 20, 20], backend="torch"
    )

    def run(items):
        pts = torch.cat(items)
        pyr = build_pyramid(pts, torch.tensor([len(c) for c in items]), **kw)
        return fpn(torch.ones(len(pts), 1), pyr), pyr

    (coarse, fine), pyr = run(clouds)
    (c0, f0), p0 = run(clouds[:1])
    (c1, f1), _ = run(clouds[1:])
    assert coarse.shape == (int(pyr.lengths[2].sum()), 8 * 2**3) and fine.shape[1] == 32
    n0c, n0f = int(p0.lengths[2][0]), int(p0.lengths[1][0])
    assert torch.allclose(coarse[:n0c], c0, atol=1e-5) and torch.allclose(
        coarse[n0c:], c1, atol=1e-5
    )
    assert torch.allclose(fine[:n0f], f0, atol=1e-5) and torch.allclose(fine[n0f:], f1, atol=1e-5)
    assert fine.abs().sum() > 0
