"""Geometric embedding, Sinkhorn, matching and LGR against their definitions."""

from __future__ import annotations

import math

import pytest
import torch

from pcreg.geometry.metrics import relative_rotation_error_deg, relative_translation_error
from pcreg.geometry.transforms import apply_transform, random_transform
from pcreg.models.geotransformer import optimal_transport as ot_mod
from pcreg.models.geotransformer.embedding import GeometricStructureEmbedding
from pcreg.models.geotransformer.lgr import inlier_counts, local_to_global_registration
from pcreg.models.geotransformer.optimal_transport import (
    LearnableLogOptimalTransport,
    exp_or_zero,
    log_sinkhorn,
    scaling_sinkhorn,
)
from pcreg.models.geotransformer.point_matching import mutual_topk_correspondences
from pcreg.models.geotransformer.superpoint_matching import superpoint_matching
from pcreg.ops.partition import point_to_node_partition


def test_embedding_is_invariant_to_rigid_motion(gen):
    emb = GeometricStructureEmbedding(32, sigma_d=0.2, sigma_a=15, angle_k=3).double()
    pts = torch.rand(2, 40, 3, generator=gen, dtype=torch.float64) * 3
    moved = apply_transform(
        pts, random_transform(gen, (2,), dtype=torch.float64, max_translation=50)
    )
    a, b = emb(pts), emb(moved)
    assert a.shape == (2, 40, 40, 32)
    assert (a - b).abs().max() < 1e-9
    # and it is not trivially constant: a non-rigid change alters it
    assert (emb(pts * 1.1) - a).abs().max() > 1e-2


def test_embedding_geometry_values(gen):
    emb = GeometricStructureEmbedding(8, sigma_d=0.5, sigma_a=15, angle_k=1).double()
    pts = torch.tensor([[[0.0, 0, 0], [1, 0, 0], [0, 2, 0]]], dtype=torch.float64)
    d, a = emb.geometry(pts)
    assert torch.allclose(d[0, 0], torch.tensor([0.0, 2.0, 4.0], dtype=torch.float64))
    # point 0's nearest neighbor is point 1; the angle from (p1 - p0) to (p2 - p0) is 90 deg
    assert math.isclose(a[0, 0, 2, 0].item(), 90 / 15, rel_tol=1e-12)
    assert math.isclose(a[0, 0, 1, 0].item(), 0.0, abs_tol=1e-12)


def test_embedding_ignores_padded_points_as_angle_neighbors(gen):
    emb = GeometricStructureEmbedding(16, 0.2, 15, 2).double()
    pts = torch.rand(1, 10, 3, generator=gen, dtype=torch.float64)
    padded = torch.cat([pts, pts[:, :1] + 1e-4], 1)  # a pad right beside point 0
    valid = torch.ones(1, 11, dtype=torch.bool)
    valid[0, 10] = False
    assert torch.allclose(emb(padded, valid)[:, :10, :10], emb(pts), atol=1e-12)


def _problem(gen, b=3, r=6, c=5, dtype=torch.float64):
    scores = torch.randn(b, r, c, generator=gen, dtype=dtype)
    row_valid = torch.ones(b, r, dtype=torch.bool)
    col_valid = torch.ones(b, c, dtype=torch.bool)
    row_valid[1, 4:] = False
    col_valid[b - 1, 3:] = False
    return scores, row_valid, col_valid


def test_sinkhorn_marginals_hold(gen):
    ot = LearnableLogOptimalTransport(100).double()
    scores, rv, cv = _problem(gen)
    out = ot(scores, rv, cv)  # (B, R+1, C+1), scaled so each real row sums to 1
    p = out.exp()
    for b in range(3):
        nr, nc = int(rv[b].sum()), int(cv[b].sum())
        rows = p[b, :-1].sum(1)
        cols = p[b, :, :-1].sum(0)
        # columns: exact (the last Sinkhorn update); rows: converged
        assert torch.allclose(cols[cv[b]], torch.ones(nc, dtype=torch.float64), atol=1e-12)
        assert torch.allclose(rows[rv[b]], torch.ones(nr, dtype=torch.float64), atol=1e-6)
        assert math.isclose(p[b, :, -1].sum().item(), nr, rel_tol=1e-6)  # dustbin column
        assert math.isclose(p[b, -1, :].sum().item(), nc, rel_tol=1e-12)  # dustbin row
        # padded rows / columns carry nothing
        assert p[b, :-1][~rv[b]].sum() < 1e-12 and p[b, :, :-1][:, ~cv[b]].sum() < 1e-12
    assert torch.isfinite(out[torch.isfinite(out)]).all() and not torch.isnan(out).any()


def test_sinkhorn_is_shift_invariant(gen):
    scores = torch.randn(2, 5, 4, generator=gen, dtype=torch.float64)
    mu = torch.log(torch.full((2, 5), 1 / 5, dtype=torch.float64))
    nu = torch.log(torch.full((2, 4), 1 / 4, dtype=torch.float64))
    a = log_sinkhorn(scores, mu, nu, 50)
    b = log_sinkhorn(scores + 7.5, mu, nu, 50)
    assert torch.allclose(a, b, atol=1e-10)


def test_sinkhorn_gradcheck(gen):
    ot = LearnableLogOptimalTransport(20).double()
    scores, rv, cv = _problem(gen, b=2, r=3, c=4)
    scores.requires_grad_(True)
    # entries of masked (impossible) pairs sit at -1e12, where finite differences are noise
    live = ot(scores, rv, cv).detach() > -1e6
    assert torch.autograd.gradcheck(lambda s: ot(s, rv, cv)[live], (scores,), eps=1e-6, atol=1e-5)
    ot(scores, rv, cv).sum().backward()
    assert ot.alpha.grad is not None and torch.isfinite(ot.alpha.grad)


def _masked_problem(gen, dtype, scale=1.0):
    ot = LearnableLogOptimalTransport(50).to(dtype)
    scores, rv, cv = _problem(gen, b=4, r=9, c=7, dtype=dtype)
    return ot, scores * scale, rv, cv


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-4)])
def test_scaling_sinkhorn_equals_log_sinkhorn(gen, monkeypatch, dtype, tol):
    ot, scores, rv, cv = _masked_problem(gen, dtype, scale=3.0)
    calls = []
    for name in ("log_sinkhorn", "scaling_sinkhorn"):
        fn = getattr(ot_mod, name)
        monkeypatch.setattr(ot_mod, name, lambda *a, _f=fn, _n=name: calls.append(_n) or _f(*a))
    fast = ot(scores, rv, cv)
    assert calls == ["scaling_sinkhorn"]
    monkeypatch.setattr(ot_mod, "_SCALING_MAX_SPREAD", -1.0)  # force the log form
    slow = ot(scores, rv, cv)
    assert calls == ["scaling_sinkhorn", "log_sinkhorn"]
    live = slow > -1e6
    assert torch.equal(live, fast > -1e6)
    assert (fast[live] - slow[live]).abs().max() < tol
    # gradients through the iterations agree too (scores and the learned dustbin score)
    s1 = scores.clone().requires_grad_(True)
    s2 = scores.clone().requires_grad_(True)
    w = torch.randn(fast.shape, generator=gen, dtype=torch.float64).to(dtype) * live
    monkeypatch.setattr(ot_mod, "_SCALING_MAX_SPREAD", 40.0)
    (ot(s1, rv, cv).masked_fill(~live, 0) * w).sum().backward()
    g_alpha_fast = ot.alpha.grad.clone()
    ot.alpha.grad = None
    monkeypatch.setattr(ot_mod, "_SCALING_MAX_SPREAD", -1.0)
    (ot(s2, rv, cv).masked_fill(~live, 0) * w).sum().backward()
    assert (s1.grad - s2.grad).abs().max() < tol * 10
    assert abs(float(g_alpha_fast - ot.alpha.grad)) < tol * 10 * max(
        1.0, float(ot.alpha.grad.abs())
    )


def test_exp_or_zero_is_exp_above_the_floor_and_zero_below():
    x = torch.tensor([0.0, -1.0, -40.0, -79.99, -80.0, -80.01, -87.0, -100.0, -1e12, 3.0])
    out = exp_or_zero(x)
    keep = x >= -80.0
    assert torch.equal(out[keep], x[keep].exp())  # bit for bit where it keeps exp
    assert torch.equal(out[~keep], torch.zeros(int((~keep).sum())))
    # the inputs it is used on: finite entries within 40 of the top, padding at -1e12
    scores = torch.rand(8, 6, 5) * -40.0
    scores[:, 4:, :] = -1e12
    assert torch.equal(exp_or_zero(scores), scores.exp())


def test_wide_score_spread_falls_back_to_log_domain(gen, monkeypatch):
    ot, scores, rv, cv = _masked_problem(gen, torch.float32, scale=60.0)  # spread >> 40
    called = []
    monkeypatch.setattr(
        ot_mod, "scaling_sinkhorn", lambda *a: called.append(1) or scaling_sinkhorn(*a)
    )
    out = ot(scores, rv, cv)
    assert not called
    assert not torch.isnan(out).any()
    # the scaling form itself would underflow here: exp(-120) is 0 in float32
    b = scores.shape[0]
    mu = torch.zeros(b, scores.shape[1])
    nu = torch.zeros(b, scores.shape[2])
    assert not torch.isfinite(scaling_sinkhorn(scores * 2, mu, nu, 5)).all()


def test_mutual_topk(gen):
    p = torch.tensor([[[0.9, 0.05, 0.0], [0.6, 0.3, 0.02], [0.0, 0.01, 0.04]]])
    valid = torch.ones(1, 3, dtype=torch.bool)
    corr = mutual_topk_correspondences(p, valid, valid, k=1, confidence_threshold=0.05)
    assert corr.nonzero().tolist() == [[0, 0, 0]]
    corr2 = mutual_topk_correspondences(p, valid, valid, k=2, confidence_threshold=0.05)
    assert corr2.nonzero().tolist() == [[0, 0, 0], [0, 1, 0], [0, 1, 1]]
    v = valid.clone()
    v[0, 0] = False
    # arguments are (src_valid, ref_valid): an invalid reference point (row 0) matches nothing
    assert not mutual_topk_correspondences(p, valid, v, k=2, confidence_threshold=0.05)[0, 0].any()
    # an invalid source point (column 0) matches nothing; the other matches stay
    only_src = mutual_topk_correspondences(p, v, valid, k=2, confidence_threshold=0.05)
    assert only_src.nonzero().tolist() == [[0, 1, 1]]


def test_superpoint_matching_finds_the_planted_pairs(gen):
    f = torch.nn.functional.normalize(torch.randn(12, 16, generator=gen), dim=-1)
    perm = torch.randperm(12, generator=gen)
    src = f[perm] + 0.01 * torch.randn(12, 16, generator=gen)
    valid = torch.ones(12, dtype=torch.bool)
    si, ri, scores = superpoint_matching(src, f, valid, valid, 12)
    assert torch.equal(torch.sort(ri).values, torch.arange(12))
    assert torch.all(perm[si] == ri)
    assert torch.all(scores[:-1] >= scores[1:])
    v = valid.clone()
    v[3] = False
    _, ri, _ = superpoint_matching(src, f, valid, v, 200)
    assert 3 not in ri.tolist() and len(ri) == 11 * 12


def test_partition(gen):
    nodes = torch.tensor([[0.0, 0, 0], [10, 0, 0], [50, 0, 0]])
    pts = torch.cat(
        [
            torch.rand(30, 3, generator=gen),
            torch.rand(5, 3, generator=gen) + torch.tensor([10.0, 0, 0]),
        ]
    )
    node_valid, idx, valid = point_to_node_partition(pts, nodes, point_limit=8)
    assert node_valid.tolist() == [True, True, False]
    assert valid.sum(1).tolist() == [8, 5, 0]
    assert torch.all(idx[1, :5] >= 30) and torch.all(idx[1, 5:] == 35) and torch.all(idx[2] == 35)
    d = torch.linalg.norm(pts - nodes[0], dim=1)
    assert set(idx[0].tolist()) == set(torch.argsort(d[:30])[:8].tolist())  # the nearest 8


def test_lgr_recovers_transform_with_40_percent_outliers(gen):
    t = random_transform(gen, dtype=torch.float64, max_translation=2.0)
    src = torch.rand(60 * 8, 3, generator=gen, dtype=torch.float64) * 4
    ref = apply_transform(src, t)
    patch = torch.arange(60).repeat_interleave(8)
    outliers = torch.rand(len(src), generator=gen) < 0.4
    ref[outliers] = torch.rand(int(outliers.sum()), 3, generator=gen, dtype=torch.float64) * 4
    ref[~outliers] += 0.002 * torch.randn(
        int((~outliers).sum()), 3, generator=gen, dtype=torch.float64
    )
    scores = torch.rand(len(src), generator=gen, dtype=torch.float64) * 0.5 + 0.5
    est, inliers = local_to_global_registration(src, ref, scores, patch, acceptance_radius=0.1)
    assert relative_rotation_error_deg(est, t) < 0.1
    assert relative_translation_error(est, t) < 1e-3
    assert inliers[~outliers].float().mean() > 0.99 and inliers[outliers].float().mean() < 0.05
    eye, empty = local_to_global_registration(src[:0], ref[:0], scores[:0], patch[:0], 0.1)
    assert torch.equal(eye, torch.eye(4, dtype=torch.float64)) and empty.numel() == 0


@pytest.mark.parametrize("offset", [0.0, 500.0])
def test_inlier_counts_equal_the_direct_count(gen, offset):
    """The one-GEMM inlier count equals moving every correspondence by every hypothesis and
    measuring (float64), for float32 inputs far from the origin and hypotheses whose rotation
    part is not exactly orthonormal (as a float32 SVD returns it)."""
    c, h = 5000, 64
    src = torch.rand(c, 3, generator=gen) * 6 + offset
    truth = random_transform(gen, max_translation=2.0)
    ref = apply_transform(src, truth) + 0.15 * torch.randn(c, 3, generator=gen)
    hyps = torch.stack([random_transform(gen, max_translation=2.0) for _ in range(h)])
    hyps[: h // 2] = truth
    hyps[: h // 2, :3, :3] += 1e-4 * torch.randn(h // 2, 3, 3, generator=gen)
    hyps[: h // 2, :3, 3] += 0.02 * torch.randn(h // 2, 3, generator=gen)
    radius = 0.2
    moved = apply_transform(src.double()[None], hyps.double())
    direct = (torch.linalg.vector_norm(moved - ref.double()[None], dim=-1) < radius).sum(1)
    counts = inlier_counts(src, ref, hyps, radius)
    assert counts.dtype == torch.int64 and counts.shape == (h,)
    assert direct[: h // 2].min() > 200  # the near-truth hypotheses do have inliers to count
    assert torch.equal(counts, direct)


@pytest.mark.parametrize("reduction", ["max", "mean"])
@pytest.mark.parametrize("row_block", [1, 7, 32, 1000])
def test_blocked_embedding_equals_the_reference_formula(gen, reduction, row_block):
    """The row-blocked, streamed embedding equals the materialised formula, padding included,
    for blocks that split items, straddle two items, or hold the whole batch."""
    emb = GeometricStructureEmbedding(16, 0.2, 15, 3, reduction=reduction).double()
    emb.row_block = row_block
    pts = torch.rand(2, 13, 3, generator=gen, dtype=torch.float64)
    valid = torch.ones(2, 13, dtype=torch.bool)
    valid[1, 10:] = False
    fast, slow = emb(pts, valid), emb.forward_reference(pts, valid)
    assert fast.shape == (2, 13, 13, 16) and slow.abs().max() > 0.1
    assert (fast - slow).abs().max() < 1e-12
    w = torch.randn(2, 13, 13, 16, generator=gen, dtype=torch.float64)
    params = list(emb.parameters())
    for a, b in zip(
        torch.autograd.grad((fast * w).sum(), params),
        torch.autograd.grad((slow * w).sum(), params),
        strict=True,
    ):
        assert (a - b).abs().max() < 1e-10
