"""pcreg.runtime.matching (numpy) against the torch matching it replaces: the same indices,
the same row order, scores to float32 rounding; on random inputs and on the network's own
intermediate tensors for the real 3DMatch demo pair."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch

from pcreg.models.geotransformer.matcher import Matcher
from pcreg.models.geotransformer.matcher import PatchPairs as TorchPatchPairs
from pcreg.models.geotransformer.optimal_transport import LearnableLogOptimalTransport
from pcreg.models.geotransformer.optimal_transport import exp_or_zero as torch_exp_or_zero
from pcreg.models.geotransformer.point_matching import (
    mutual_topk_correspondences as torch_mutual_topk,
)
from pcreg.models.geotransformer.superpoint_matching import (
    superpoint_matching as torch_superpoint_matching,
)
from pcreg.ops.partition import Patches, point_to_node_partition
from pcreg.runtime import matching

REPO = Path(__file__).resolve().parents[2]
DEMO = (
    Path(os.environ.get("PCREG_SHARED_DATA", REPO.parent / "shared" / "data"))
    / "geotransformer_repo"
    / "demo"
)
RTOL, ATOL = 1e-5, 1e-6


def _t(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x))


def _assert_close(actual: np.ndarray, expected: torch.Tensor, atol: float = ATOL) -> None:
    expected = expected.numpy()
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=atol)


# ------------------------------------------------------------------ superpoint matching
def _features(rng: np.random.Generator, m: int, n: int, c: int = 16):
    """Reference features and sources that are noisy copies of some of them (so that the
    matching has real structure), float32, plus masks with some invalid superpoints."""
    ref = rng.standard_normal((n, c)).astype(np.float32)
    src = rng.standard_normal((m, c)).astype(np.float32)
    k = min(m, n) // 2
    src[:k] = ref[rng.permutation(n)[:k]] + 0.1 * rng.standard_normal((k, c)).astype(np.float32)
    return src, ref, rng.random(m) > 0.2, rng.random(n) > 0.2


@pytest.mark.parametrize("dual", [True, False])
@pytest.mark.parametrize("k", [1, 40, 100_000])  # 100_000 > valid pairs: all of them
@pytest.mark.parametrize("seed", [0, 1])
def test_superpoint_matching_equals_torch(seed, k, dual):
    rng = np.random.default_rng(seed)
    src, ref, sv, rv = _features(rng, 37, 29)
    si, ri, sc = matching.superpoint_matching(src, ref, sv, rv, k, dual)
    tsi, tri, tsc = torch_superpoint_matching(_t(src), _t(ref), _t(sv), _t(rv), k, dual)
    assert si.dtype == ri.dtype == np.int64
    assert len(si) == min(k, int(sv.sum()) * int(rv.sum()))
    np.testing.assert_array_equal(si, tsi.numpy())
    np.testing.assert_array_equal(ri, tri.numpy())
    _assert_close(sc, tsc, atol=0.0)
    assert sv[si].all() and rv[ri].all()


def test_superpoint_matching_without_valid_pairs_is_empty():
    rng = np.random.default_rng(2)
    src, ref, sv, rv = _features(rng, 5, 6)
    sv[:] = False
    si, ri, sc = matching.superpoint_matching(src, ref, sv, rv, 256)
    assert si.shape == ri.shape == sc.shape == (0,)
    assert si.dtype == np.int64 and sc.dtype == np.float32
    tsi, _, _ = torch_superpoint_matching(_t(src), _t(ref), _t(sv), _t(rv), 256)
    assert tsi.numel() == 0


def test_superpoint_matching_breaks_ties_by_the_lower_flat_index():
    """Duplicated features give exactly equal similarities: documented order, and the same
    set and scores as torch, whose order among ties is its selection algorithm's."""
    rng = np.random.default_rng(3)
    ref = rng.standard_normal((4, 8)).astype(np.float32)
    src = np.repeat(ref[:2], 3, axis=0)  # sources 0-2 equal ref 0, 3-5 equal ref 1
    sv, rv = np.ones(6, bool), np.ones(4, bool)
    si, ri, sc = matching.superpoint_matching(src, ref, sv, rv, 6, dual_normalization=False)
    assert ri.tolist() == [0, 0, 0, 1, 1, 1] and si.tolist() == [0, 1, 2, 3, 4, 5]
    assert len(set(sc[:3].tolist())) == 1
    tsi, tri, tsc = torch_superpoint_matching(_t(src), _t(ref), _t(sv), _t(rv), 6, False)
    pairs = sorted(zip(ri.tolist(), si.tolist(), strict=True))
    assert pairs == sorted(zip(tri.tolist(), tsi.tolist(), strict=True))
    np.testing.assert_allclose(np.sort(sc), np.sort(tsc.numpy()), rtol=RTOL, atol=0)


# ------------------------------------------------------------------ exp_or_zero
def test_exp_or_zero_equals_torch():
    x = np.array(
        [0.0, -1.0, -40.0, -79.99, -80.0, -80.01, -87.0, -100.0, -1e12, 3.0, np.nan],
        dtype=np.float32,
    )
    rng = np.random.default_rng(4)
    x = np.concatenate([x, rng.uniform(-90.0, 2.0, 10_000).astype(np.float32)])
    out, ref = matching.exp_or_zero(x), torch_exp_or_zero(_t(x)).numpy()
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out == 0, ref == 0)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    assert out[x == -80.0][0] > 0  # the floor itself keeps its exp
    np.testing.assert_allclose(out, ref, rtol=2e-7, atol=0)  # within one float32 ulp
    assert np.mean(out == ref) > 0.97  # and mostly the same bits


# ------------------------------------------------------------------ patches
def _patches(rng: np.random.Generator, n_points: int, n_nodes: int, limit: int) -> Patches:
    """Patches of a random cloud through the torch partition: short patches (shadow index),
    and, with more nodes than points can fill, empty ones."""
    pts = torch.from_numpy(rng.uniform(0, 1, (n_points, 3)).astype(np.float32))
    nodes = torch.from_numpy(rng.uniform(0, 1, (n_nodes, 3)).astype(np.float32))
    node_valid, idx, valid = point_to_node_partition(pts, nodes, limit)
    padded = torch.cat([pts, pts.new_zeros(1, 3)], 0)
    return Patches(nodes, node_valid, idx, valid, padded[idx], pts)


def _gather(si: np.ndarray, ri: np.ndarray, sp: Patches, rp: Patches, sf, rf):
    return matching.gather_patches(
        si,
        ri,
        src_knn_indices=sp.knn_indices.numpy(),
        src_knn_points=sp.knn_points.numpy(),
        src_knn_valid=sp.knn_valid.numpy(),
        src_fine=sf.numpy(),
        ref_knn_indices=rp.knn_indices.numpy(),
        ref_knn_points=rp.knn_points.numpy(),
        ref_knn_valid=rp.knn_valid.numpy(),
        ref_fine=rf.numpy(),
    )


def _assert_patches_equal(pp: matching.PatchPairs, tp: TorchPatchPairs) -> None:
    for name in ("src_points", "ref_points", "src_valid", "ref_valid", "src_feats", "ref_feats"):
        expected = getattr(tp, name).numpy()
        actual = getattr(pp, name)
        assert actual.dtype == expected.dtype, name
        np.testing.assert_array_equal(actual, expected, err_msg=name)


@pytest.mark.parametrize("p", [0, 1, 25])
def test_gather_patches_equals_torch(p):
    rng = np.random.default_rng(5 + p)
    sp, rp = _patches(rng, 70, 12, 10), _patches(rng, 50, 9, 10)
    assert not sp.knn_valid.all() and not rp.knn_valid.all()  # short patches present
    sf = torch.from_numpy(rng.standard_normal((70, 8)).astype(np.float32))
    rf = torch.from_numpy(rng.standard_normal((50, 8)).astype(np.float32))
    si, ri = rng.integers(0, 12, p), rng.integers(0, 9, p)
    pp = _gather(si, ri, sp, rp, sf, rf)
    tp = Matcher.gather_patches([(_t(si), _t(ri), None)], [sp], [rp], [sf], [rf])
    _assert_patches_equal(pp, tp)
    assert (pp.src_feats[~pp.src_valid] == 0).all()


# ------------------------------------------------------------------ dense correspondences
def _probabilities(rng: np.random.Generator, p: int, kr: int, kc: int):
    """Assignment probabilities with ties at zero (padding) and masks."""
    prob = rng.random((p, kr, kc)).astype(np.float32) ** 3
    rv, cv = rng.random((p, kr)) > 0.25, rng.random((p, kc)) > 0.25
    prob[~(rv[:, :, None] & cv[:, None, :])] = 0.0
    return prob, cv, rv


@pytest.mark.parametrize("mutual", [True, False])
@pytest.mark.parametrize("k", [1, 3, 50])  # 50: more than the patch size
@pytest.mark.parametrize("threshold", [0.0, 0.05, 0.5])
def test_mutual_topk_equals_torch(k, mutual, threshold):
    rng = np.random.default_rng(6)
    prob, src_valid, ref_valid = _probabilities(rng, 40, 9, 7)
    mask = matching.mutual_topk_correspondences(prob, src_valid, ref_valid, k, threshold, mutual)
    ref = torch_mutual_topk(_t(prob), _t(src_valid), _t(ref_valid), k, threshold, mutual)
    assert mask.dtype == np.bool_
    np.testing.assert_array_equal(mask, ref.numpy())
    assert mask.any()


def test_mutual_topk_breaks_ties_by_the_lower_index():
    """Exactly equal probabilities at the k-th place: the lower index is kept (documented;
    torch's choice among ties is its selection algorithm's). The sorting path taken when
    scores hold -inf agrees with the argmax path."""
    scores = np.array([[[0.5, 0.5, 0.5, 0.1], [0.2, 0.2, 0.3, 0.3]]], dtype=np.float32)
    valid_src, valid_ref = np.ones((1, 4), bool), np.ones((1, 2), bool)
    mask = matching.mutual_topk_correspondences(scores, valid_src, valid_ref, 2, 0.0, False)
    assert mask[0].tolist() == [[True, True, True, True], [True, True, True, True]]
    mutual = matching.mutual_topk_correspondences(scores, valid_src, valid_ref, 2, 0.0)
    assert mutual[0].tolist() == [[True, True, False, False], [False, False, True, True]]
    rng = np.random.default_rng(9)
    prob, cv, rv = _probabilities(rng, 20, 6, 5)
    prob[prob == 0] = np.round(prob[prob == 0] + 0.3, 1)  # ties above the threshold
    with_inf = prob.copy()
    with_inf[0, 0, 0] = -np.inf
    for k in (1, 2, 3):
        for p in (prob, with_inf):
            fast = matching.mutual_topk_correspondences(p, cv, rv, k, 0.0, False)
            key = np.where(p == -np.inf, np.inf, -p)
            rows = np.argsort(key, axis=2, kind="stable")[:, :, :k]
            cols = np.argsort(key, axis=1, kind="stable")[:, :k, :]
            expected = np.zeros(p.shape, bool)
            np.put_along_axis(expected, rows, True, axis=2)
            np.put_along_axis(expected, cols, True, axis=1)
            expected &= (p > 0) & rv[:, :, None] & cv[:, None, :]
            np.testing.assert_array_equal(fast, expected)


def _matcher(topk: int, threshold: float, mutual: bool) -> Matcher:
    return Matcher(256, True, 10, topk, threshold, mutual)


def _sinkhorn_case(rng: np.random.Generator, p: int, k: int):
    """Patch pairs with short patches and the log assignment of the torch optimal transport
    on their feature similarities (the network's last step)."""
    sp, rp = _patches(rng, 90, 10, k), _patches(rng, 80, 10, k)
    sf = torch.from_numpy(rng.standard_normal((90, 16)).astype(np.float32))
    rf = torch.from_numpy(rng.standard_normal((80, 16)).astype(np.float32))
    si, ri = rng.integers(0, 10, p), rng.integers(0, 10, p)
    if p > 0:  # the first pair has the shortest non-empty source patch
        size = sp.knn_valid.sum(1).numpy()
        si[0] = np.argmin(np.where(size > 0, size, k + 1))
    tp = Matcher.gather_patches([(_t(si), _t(ri), None)], [sp], [rp], [sf], [rf])
    if p == 0:  # (the torch optimal transport needs a patch pair to run)
        return _gather(si, ri, sp, rp, sf, rf), tp, torch.zeros(0, k + 1, k + 1)
    m = _matcher(3, 0.05, True)
    m.optimal_transport = LearnableLogOptimalTransport(30)
    with torch.no_grad():
        log_assign = m.assignment(tp)
    return _gather(si, ri, sp, rp, sf, rf), tp, log_assign


def _check_correspondences(log_assign, pp, tp, topk, threshold, mutual) -> int:
    src, ref, scores, patch = matching.correspondences(
        log_assign.numpy(), pp, topk, threshold, mutual
    )
    tc = _matcher(topk, threshold, mutual).correspondences(log_assign, tp)
    np.testing.assert_array_equal(patch, tc.patch.numpy())
    assert patch.dtype == np.int64
    np.testing.assert_array_equal(src, tc.src_points.numpy())
    np.testing.assert_array_equal(ref, tc.ref_points.numpy())
    _assert_close(scores, tc.scores)
    assert src.shape == ref.shape == (len(patch), 3)
    return len(patch)


@pytest.mark.parametrize("mutual", [True, False])
@pytest.mark.parametrize(("p", "k"), [(30, 12), (1, 12), (0, 12), (20, 4)])
def test_correspondences_equal_torch_on_sinkhorn_output(p, k, mutual):
    rng = np.random.default_rng(7 + p + k)
    pp, tp, log_assign = _sinkhorn_case(rng, p, k)
    assert (log_assign < -80).any() or p == 0  # padding rows / columns present
    n = _check_correspondences(log_assign, pp, tp, 3, 0.05, mutual)
    assert (n > 0) == (p > 0)
    # nothing confident enough: no correspondence at all
    assert _check_correspondences(log_assign, pp, tp, 3, 0.999, mutual) == 0


def test_correspondences_below_the_exp_floor_are_zero_not_tiny():
    """A log probability under -80 is exactly 0 (torch's exp_or_zero), so even a threshold of
    0 rejects it; plain exp would give ~1e-37 > 0 and a correspondence."""
    rng = np.random.default_rng(8)
    pp, tp, log_assign = _sinkhorn_case(rng, 3, 6)
    low = log_assign.clone()
    low[:, :-1, :-1] = torch.from_numpy(
        rng.uniform(-100.0, -81.0, tuple(low[:, :-1, :-1].shape)).astype(np.float32)
    )
    assert _check_correspondences(low, pp, tp, 3, 0.0, True) == 0
    plain = np.exp(low.numpy()[:, :-1, :-1].astype(np.float64)).astype(np.float32)
    assert matching.mutual_topk_correspondences(plain, pp.src_valid, pp.ref_valid, 3, 0.0).any()
    # with some entries above the floor, only those can match
    low[0, :-1, :-1] = log_assign[0, :-1, :-1]
    assert _check_correspondences(low, pp, tp, 3, 0.0, True) > 0


# ------------------------------------------------------------------ torch-free import
def test_runtime_modules_do_not_import_torch():
    code = (
        "import sys\n"
        "import pcreg.runtime.matching, pcreg.runtime.lgr\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


# ------------------------------------------------------------------ the real pair
@pytest.fixture(scope="module")
def real_pair():
    """The shipped indoor network on the 3DMatch demo pair: its output and the fine features
    it gathered patches from (captured on the way)."""
    if not (DEMO / "src.npy").is_file():
        pytest.skip(f"real data not found at {DEMO}")
    from pcreg.registration.loading import load_network

    net = load_network("indoor").network
    batch = net.collate([(np.load(DEMO / "src.npy"), np.load(DEMO / "ref.npy"))])
    fine: dict = {}
    gather = Matcher.gather_patches

    def capture(node_corr, src_patches, ref_patches, src_fine, ref_fine):
        fine.update(src=src_fine[0], ref=ref_fine[0])
        return gather(node_corr, src_patches, ref_patches, src_fine, ref_fine)

    with torch.no_grad(), mock.patch.object(Matcher, "gather_patches", staticmethod(capture)):
        out = net.model(batch.pyramid, batch.feats, batch.batch_size)
    return net.model, out, fine


@pytest.mark.data
def test_real_pair_matching_equals_the_network(real_pair):
    model, out, fine = real_pair
    m = model.matcher
    sp, rp = out.src_patches[0], out.ref_patches[0]
    n_src, n_ref = sp.nodes.shape[0], rp.nodes.shape[0]
    src_valid = (sp.node_valid & out.src_valid_c[0, :n_src]).numpy()
    ref_valid = (rp.node_valid & out.ref_valid_c[0, :n_ref]).numpy()
    si, ri, sc = matching.superpoint_matching(
        out.src_feats_c[0, :n_src].numpy(),
        out.ref_feats_c[0, :n_ref].numpy(),
        src_valid,
        ref_valid,
        m.num_correspondences,
        m.dual_normalization,
    )
    tsi, tri, tsc = out.node_corr[0]
    np.testing.assert_array_equal(si, tsi.numpy())
    np.testing.assert_array_equal(ri, tri.numpy())
    _assert_close(sc, tsc, atol=0.0)

    pp = _gather(si, ri, sp, rp, fine["src"], fine["ref"])
    np.testing.assert_array_equal(pp.src_points, out.src_knn_points.numpy())
    np.testing.assert_array_equal(pp.ref_points, out.ref_knn_points.numpy())
    np.testing.assert_array_equal(pp.src_valid, out.src_knn_valid.numpy())
    np.testing.assert_array_equal(pp.ref_valid, out.ref_knn_valid.numpy())
    tp = Matcher.gather_patches(out.node_corr, [sp], [rp], [fine["src"]], [fine["ref"]])
    _assert_patches_equal(pp, tp)

    src, ref, scores, patch = matching.correspondences(
        out.matching_scores.numpy(), pp, m.topk, m.confidence_threshold, m.mutual
    )
    assert len(patch) > 1000
    np.testing.assert_array_equal(patch, m.correspondences(out.matching_scores, tp).patch.numpy())
    np.testing.assert_array_equal(src, out.src_corr_points[0].numpy())
    np.testing.assert_array_equal(ref, out.ref_corr_points[0].numpy())
    _assert_close(scores, out.corr_scores[0])
