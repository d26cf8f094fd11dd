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
    cylindrical_kernel_points,
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


@pytest.mark.parametrize("cin", [4, 1])  # 1: the row-vector path of a single input channel
def test_kpconv_matches_the_formula(gen, cin):
    torch.manual_seed(0)
    conv = KPConv(cin, 5, 15, radius=0.3, sigma=0.25).double()
    s_pts = torch.rand(20, 3, generator=gen, dtype=torch.float64)
    q_pts = torch.rand(6, 3, generator=gen, dtype=torch.float64)
    feats = torch.randn(20, cin, generator=gen, dtype=torch.float64)
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
    norm = PackedGroupNorm(4, 8).double()
    torch.nn.init.normal_(norm.weight)
    torch.nn.init.normal_(norm.bias)
    ref = torch.nn.GroupNorm(4, 8).double()
    ref.load_state_dict(norm.state_dict())
    lengths = torch.tensor([5, 9, 2])
    x = torch.randn(16, 8, generator=gen, dtype=torch.float64) * 3 + 1
    x.requires_grad_(True)
    out = norm(x, lengths)
    w = torch.randn(16, 8, generator=gen, dtype=torch.float64)
    grads = torch.autograd.grad((out * w).sum(), [x, norm.weight, norm.bias])
    expected = torch.cat([ref(x[a:b].T[None])[0].T for a, b in ((0, 5), (5, 14), (14, 16))])
    assert (out - expected).abs().max() < 1e-12
    ref_grads = torch.autograd.grad((expected * w).sum(), [x, ref.weight, ref.bias])
    for a, b in zip(grads, ref_grads, strict=True):
        assert (a - b).abs().max() < 1e-10


def test_running_max_pool_equals_max_over_the_gathered_neighbors(gen):
    from pcreg.models.backbones.kpconv.conv import gather_with_shadow

    feats = torch.randn(50, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    idx = torch.randint(0, 51, (30, 7), generator=gen)
    fast = maxpool(feats, idx)
    slow = gather_with_shadow(feats, idx).max(dim=1).values
    assert torch.equal(fast, slow)
    w = torch.randn(30, 6, generator=gen, dtype=torch.float64)
    (g_fast,) = torch.autograd.grad((fast * w).sum(), feats)
    (g_slow,) = torch.autograd.grad((slow * w).sum(), feats)
    assert torch.allclose(g_fast, g_slow, atol=1e-12) and g_fast.abs().sum() > 0


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


def _rotated_pyramid(pyr, rot: torch.Tensor, shift: torch.Tensor):
    """The same pyramid (same neighbor lists) with every stage's points moved rigidly."""
    return pyr._replace(points=[p @ rot.T + shift for p in pyr.points])


def test_local_frames_rotate_with_the_cloud(gen):
    from pcreg.geometry import random_rotation
    from pcreg.models.backbones.kpconv.frames import local_reference_frames

    pts = torch.randn(300, 3, generator=gen, dtype=torch.float64) * torch.tensor([1.0, 0.6, 0.3])
    idx = torch.cdist(pts, pts).topk(24, largest=False).indices
    frames = local_reference_frames(pts, pts, idx, radius=2.0)
    assert torch.allclose(
        frames.transpose(1, 2) @ frames, torch.eye(3, dtype=torch.float64), atol=1e-9
    )
    assert torch.allclose(torch.linalg.det(frames), torch.ones(300, dtype=torch.float64))
    rot = random_rotation(gen, dtype=torch.float64)
    moved = local_reference_frames(pts @ rot.T + 5.0, pts @ rot.T + 5.0, idx, radius=2.0)
    # F' = R F: the axes turn with the cloud, so offsets in the frame do not change
    assert torch.allclose(moved, rot @ frames, atol=1e-6)
    # a padded (shadow) neighbor list gives the identity
    lone = local_reference_frames(pts[:1], pts, torch.full((1, 4), 300), radius=2.0)
    assert torch.equal(lone[0], torch.eye(3, dtype=torch.float64))


@pytest.mark.parametrize("kernel", ["frame", "cylindrical"])
def test_rotation_invariant_fpn_features_do_not_change_under_rotation(gen, kernel):
    from pcreg.geometry import random_rotation

    torch.manual_seed(0)
    cloud = _cloud(gen, 800, 0.0)
    pyr = build_pyramid(
        cloud, torch.tensor([len(cloud)]), num_stages=3, voxel_size=0.1, radius=0.25,
        neighbor_limits=[20, 20, 20], backend="torch",
    )  # fmt: skip
    rot = random_rotation(gen)
    moved = _rotated_pyramid(pyr, rot, torch.tensor([3.0, -1.0, 2.0]))
    feats = torch.ones(len(cloud), 1)
    invariant = KPConvFPN(
        1, 32, 8, 15, 0.25, 0.2, 4, num_stages=3, rotation_invariant=True, invariant_kernel=kernel
    ).eval()
    plain = KPConvFPN(1, 32, 8, 15, 0.25, 0.2, 4, num_stages=3).eval()
    plain.load_state_dict(invariant.state_dict())  # same weights, only the frames differ
    with torch.no_grad():
        (c, f), (c_r, f_r) = invariant(feats, pyr), invariant(feats, moved)
        (_, pf), (_, pf_r) = plain(feats, pyr), plain(feats, moved)
    scale = f.abs().mean()
    # near-symmetric neighborhoods may flip an axis: compare the bulk, not every point
    rel_err = (f - f_r).norm(dim=1) / f.norm(dim=1).clamp(min=1e-6)
    assert rel_err.median() < 1e-4 and (rel_err < 1e-3).float().mean() > 0.9
    assert (c - c_r).abs().mean() < 1e-3 * c.abs().mean()
    # the plain backbone is not invariant: the test can tell the difference
    plain_err = (pf - pf_r).norm(dim=1) / pf.norm(dim=1).clamp(min=1e-6)
    assert plain_err.median() > 1e-2
    assert scale > 0


@pytest.mark.parametrize("rotation_invariant", [False, True])
def test_shared_stage_influences_equal_per_convolution_influences(gen, rotation_invariant):
    """The FPN computes one influence tensor per stage for its non-strided convs; values and
    gradients equal computing it inside every convolution."""
    torch.manual_seed(0)
    fpn = KPConvFPN(
        1, 32, 8, 15, 0.25, 0.2, 4, num_stages=3, rotation_invariant=rotation_invariant
    ).double()
    cloud = _cloud(gen, 700, 0.0).double()
    pyr = build_pyramid(
        cloud, torch.tensor([len(cloud)]), num_stages=3, voxel_size=0.1, radius=0.25,
        neighbor_limits=[20, 20, 20], backend="torch",
    )  # fmt: skip
    feats = torch.ones(len(cloud), 1, dtype=torch.float64)
    # the sharing is only valid because a stage's convs have the same kernel and sigma
    for blocks in fpn.stages:
        convs = [b.conv for b in blocks if not getattr(b, "strided", False)]
        assert all(torch.equal(c.kernel_points, convs[0].kernel_points) for c in convs)
        assert len({c.sigma for c in convs}) == 1
    results = []
    for share in (True, False):
        fpn.share_influence = share
        fpn.zero_grad()
        coarse, fine = fpn(feats, pyr)
        (coarse.square().sum() + fine.sin().sum()).backward()
        grads = [p.grad.clone() for p in fpn.parameters() if p.grad is not None]
        results.append((coarse.detach(), fine.detach(), grads))
    (c0, f0, g0), (c1, f1, g1) = results
    assert f0.abs().max() > 0 and len(g0) == len(g1) > 10
    assert torch.allclose(c0, c1, atol=1e-12) and torch.allclose(f0, f1, atol=1e-12)
    assert all(torch.allclose(a, b, atol=1e-10) for a, b in zip(g0, g1, strict=True))


def test_in_place_influence_equals_the_differentiable_formula(gen):
    """Without coordinate gradients the influence is computed in place; with them, out of
    place — the same numbers, and the gradient path still works."""
    conv = KPConv(4, 6, 15, radius=0.3, sigma=0.25).double()
    pts = torch.rand(200, 3, generator=gen, dtype=torch.float64)
    idx = torch.cdist(pts, pts).topk(16, largest=False).indices
    idx[:5, -3:] = 200  # shadow neighbors
    fast = conv.influence(pts, pts, idx)
    grad_pts = pts.clone().requires_grad_(True)
    slow = conv.influence(grad_pts, grad_pts, idx)
    assert torch.allclose(fast, slow.detach(), atol=1e-12)
    assert (fast[:5, -3:] == 0).all() and fast.max() > 0.5
    slow.sum().backward()
    assert grad_pts.grad is not None and grad_pts.grad.abs().sum() > 0


def test_cylindrical_disposition_lies_in_the_half_plane():
    kp = cylindrical_kernel_points(15)
    assert kp.shape == (15, 3) and kp.dtype == np.float32
    assert np.all(kp[:, 1] == 0) and np.all(kp[:, 0] >= 0)
    assert np.linalg.norm(kp, axis=1).max() <= 1.0 + 1e-6
    assert len({tuple(p) for p in kp.tolist()}) == 15  # no two kernel points coincide
    assert (kp[:, 2] == 0).sum() == 5  # the tangent-plane row
    with pytest.raises(ValueError, match="15 points"):
        cylindrical_kernel_points(12)


def test_cylindrical_kpconv_ignores_the_in_plane_axes(gen):
    """Spinning every local frame about its z axis changes nothing for the cylindrical kernel
    (the in-plane axes are what flat patches cannot define) and does change the full-frame
    kernel, so the test can tell them apart."""
    from pcreg.geometry import random_rotation

    torch.manual_seed(0)
    pts = _cloud(gen, 300, 0.0).double()
    nbrs = torch.randint(0, 300, (300, 12), generator=gen)
    nbrs[:, -2:] = 300  # shadow neighbors
    feats = torch.rand(300, 4, generator=gen, dtype=torch.float64)
    frames = torch.stack([random_rotation(gen).double() for _ in range(300)])
    theta = torch.rand(300, generator=gen, dtype=torch.float64) * 2 * torch.pi
    c, s = theta.cos(), theta.sin()
    spin = torch.zeros(300, 3, 3, dtype=torch.float64)
    spin[:, 0, 0], spin[:, 0, 1], spin[:, 1, 0], spin[:, 1, 1], spin[:, 2, 2] = c, -s, s, c, 1
    spun = frames @ spin  # same z axes, rotated x / y
    full = KPConv(4, 6, 15, radius=0.3, sigma=0.25).double()
    cyl = KPConv(4, 6, 15, radius=0.3, sigma=0.25).double()
    cyl.load_state_dict(full.state_dict())
    cyl.use_cylindrical_kernel()
    assert cyl.kernel_points.abs().max() <= 0.3 + 1e-9 and torch.all(cyl.kernel_points[:, 1] == 0)
    with torch.no_grad():
        a, b = cyl(feats, pts, pts, nbrs, frames), cyl(feats, pts, pts, nbrs, spun)
        fa, fb = full(feats, pts, pts, nbrs, frames), full(feats, pts, pts, nbrs, spun)
    assert a.abs().max() > 0 and torch.allclose(a, b, atol=1e-10)
    assert (fa - fb).abs().max() > 1e-3
    # flipping z mirrors the heights: a different response (the sign is the frame's job)
    flip = frames * torch.tensor([-1.0, 1.0, -1.0], dtype=torch.float64)
    with torch.no_grad():
        assert (cyl(feats, pts, pts, nbrs, flip) - a).abs().max() > 1e-3
    with pytest.raises(ValueError, match="local frames"):
        cyl(feats, pts, pts, nbrs)


def test_cylindrical_kernel_formula(gen):
    """The influence is the KPConv formula on (in-plane distance, 0, height) offsets."""
    pts = _cloud(gen, 50, 0.0).double()
    nbrs = torch.randint(0, 50, (50, 6), generator=gen)
    frames = torch.eye(3, dtype=torch.float64).expand(50, 3, 3).contiguous()
    cyl = KPConv(1, 1, 15, radius=0.3, sigma=0.25).double()
    cyl.use_cylindrical_kernel()
    rel = pts[nbrs] - pts[:, None]
    rho = rel[..., :2].norm(dim=-1)
    cyl_rel = torch.stack([rho, torch.zeros_like(rho), rel[..., 2]], -1)
    dist = (cyl_rel[..., None, :] - cyl.kernel_points).norm(dim=-1)
    expected = (1 - dist / 0.25).clamp(min=0)
    assert torch.allclose(cyl.influence(pts, pts, nbrs, frames), expected, atol=1e-12)


def test_fpn_rejects_unknown_or_frameless_invariant_kernels():
    with pytest.raises(ValueError, match="frame or cylindrical"):
        KPConvFPN(1, 32, 8, 15, 0.25, 0.2, 4, num_stages=3, rotation_invariant=True,
                  invariant_kernel="spherical")  # fmt: skip
    with pytest.raises(ValueError, match="needs rotation_invariant"):
        KPConvFPN(1, 32, 8, 15, 0.25, 0.2, 4, num_stages=3, invariant_kernel="cylindrical")
