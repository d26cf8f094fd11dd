"""pcreg.runtime.lgr (numpy) against the torch local-to-global registration and weighted
Procrustes: the same votes and inliers, transforms within float32 rounding; on random
correspondences and on the network's own correspondences for the real 3DMatch demo pair."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from pcreg.geometry.procrustes import weighted_procrustes as torch_procrustes
from pcreg.geometry.transforms import random_transform
from pcreg.models.geotransformer.lgr import inlier_counts as torch_inlier_counts
from pcreg.models.geotransformer.lgr import local_to_global_registration as torch_lgr
from pcreg.runtime import lgr

REPO = Path(__file__).resolve().parents[2]
DEMO = (
    Path(os.environ.get("PCREG_SHARED_DATA", REPO.parent / "shared" / "data"))
    / "geotransformer_repo"
    / "demo"
)
TRANSFORM_ATOL = 1e-5


def _t(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x))


def _motion(seed: int) -> np.ndarray:
    gen = torch.Generator().manual_seed(seed)
    return random_transform(gen, max_translation=2.0, dtype=torch.float64).numpy()


def _correspondences(seed: int, n_patches: int, per_patch, outliers: float = 0.3):
    """Dense correspondences grouped by patch like the network's (``per_patch`` a count or
    an array of counts), float32: inliers of a random motion with 1 cm noise, plus outliers.
    Returns ``src, ref, scores, patch`` and the motion."""
    rng = np.random.default_rng(seed)
    counts = np.broadcast_to(np.asarray(per_patch), (n_patches,))
    patch = np.repeat(np.arange(n_patches), counts)
    c = len(patch)
    centres = rng.uniform(-2, 2, (n_patches, 3))
    src = centres[patch] + rng.normal(0, 0.1, (c, 3))
    gt = _motion(seed)
    ref = src @ gt[:3, :3].T + gt[:3, 3] + rng.normal(0, 0.01, (c, 3))
    bad = rng.random(c) < outliers
    ref[bad] += rng.normal(0, 0.5, (int(bad.sum()), 3))
    scores = rng.uniform(0.05, 1.0, c)
    return src.astype(np.float32), ref.astype(np.float32), scores.astype(np.float32), patch, gt


def _compare(src, ref, scores, patch, radius, **kw):
    t, inliers = lgr.local_to_global_registration(src, ref, scores, patch, radius, **kw)
    tt, ti = torch_lgr(_t(src), _t(ref), _t(scores), _t(patch), radius, **kw)
    assert t.dtype == np.float32 and t.shape == (4, 4)
    assert inliers.dtype == np.bool_ and inliers.shape == (len(src),)
    np.testing.assert_allclose(t, tt.numpy(), rtol=0, atol=TRANSFORM_ATOL)
    np.testing.assert_array_equal(inliers, ti.numpy())
    return t, inliers


def _assert_transforms_close(out: np.ndarray, expected: np.ndarray) -> None:
    """Rotations to ~10 ulp; translations to that times the lever arm of the centroids
    (|centre| ~ 17 m in the Procrustes tests): a rotation difference of 1e-6 moves it ~2e-5."""
    atol = 1e-6 if out.dtype == np.float32 else 1e-13
    np.testing.assert_allclose(out[..., :3, :3], expected[..., :3, :3], rtol=0, atol=10 * atol)
    np.testing.assert_allclose(out[..., :3, 3], expected[..., :3, 3], rtol=0, atol=50 * atol)
    np.testing.assert_array_equal(out[..., 3, :], expected[..., 3, :])


# ------------------------------------------------------------------ weighted Procrustes
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [3, 4, 50])
def test_weighted_procrustes_equals_torch(n, dtype):
    rng = np.random.default_rng(n)
    src = rng.normal(0, 1, (16, n, 3)).astype(dtype) + 10.0  # away from the origin
    ref = rng.normal(0, 1, (16, n, 3)).astype(dtype)  # unrelated: many det = -1 fixes
    w = rng.uniform(-0.2, 1.0, (16, n)).astype(dtype)  # negatives count as 0
    w[:, :3] = np.abs(w[:, :3]) + 0.1  # >= 3 points weighted: a unique solution
    out = lgr.weighted_procrustes(src, ref, w)
    assert out.dtype == dtype and out.shape == (16, 4, 4)
    _assert_transforms_close(out, torch_procrustes(_t(src), _t(ref), _t(w)).numpy())
    unweighted = lgr.weighted_procrustes(src, ref)
    _assert_transforms_close(unweighted, torch_procrustes(_t(src), _t(ref)).numpy())
    rot = out[:, :3, :3].astype(np.float64)
    np.testing.assert_allclose(np.linalg.det(rot), 1.0, atol=1e-5)
    # the reflection fix is exercised: the unfixed V U^T is a reflection for some problems
    wn = np.maximum(w, 0)[..., None].astype(np.float64)
    cs = src - (src * wn).sum(1, keepdims=True) / wn.sum(1, keepdims=True)
    cr = ref - (ref * wn).sum(1, keepdims=True) / wn.sum(1, keepdims=True)
    u, _, vh = np.linalg.svd(np.swapaxes(cs, 1, 2) @ (cr * wn))
    assert (np.linalg.det(np.swapaxes(vh, 1, 2) @ np.swapaxes(u, 1, 2)) < 0).any()


def test_weighted_procrustes_recovers_a_motion_and_handles_zero_weights():
    gt = _motion(1)
    rng = np.random.default_rng(1)
    src = rng.normal(0, 1, (30, 3))
    est = lgr.weighted_procrustes(src, src @ gt[:3, :3].T + gt[:3, 3])
    np.testing.assert_allclose(est, gt, atol=1e-10)
    zero = lgr.weighted_procrustes(src, src, np.zeros(30))
    np.testing.assert_allclose(zero, torch_procrustes(_t(src), _t(src), torch.zeros(30)).numpy())


@pytest.mark.parametrize("n", [1, 2])
def test_weighted_procrustes_degenerate_is_a_minimiser_like_torch(n):
    """Below 3 points the rotation about the line through them is free: numpy's LAPACK and
    torch's (MKL) pick different ones, both proper rotations with the same weighted cost."""
    rng = np.random.default_rng(10 + n)
    src = rng.normal(0, 1, (20, n, 3)).astype(np.float32)
    ref = rng.normal(0, 1, (20, n, 3)).astype(np.float32)
    w = rng.uniform(0.1, 1.0, (20, n)).astype(np.float32)

    def cost(t: np.ndarray) -> np.ndarray:
        moved = src.astype(np.float64) @ np.swapaxes(t[:, :3, :3], 1, 2) + t[:, None, :3, 3]
        return (w * ((moved - ref) ** 2).sum(-1)).sum(-1)

    out = lgr.weighted_procrustes(src, ref, w).astype(np.float64)
    expected = torch_procrustes(_t(src), _t(ref), _t(w)).numpy().astype(np.float64)
    rot = out[:, :3, :3]
    np.testing.assert_allclose(
        rot @ np.swapaxes(rot, 1, 2), np.broadcast_to(np.eye(3), rot.shape), atol=1e-5
    )
    np.testing.assert_allclose(np.linalg.det(rot), 1.0, atol=1e-5)
    np.testing.assert_allclose(cost(out), cost(expected), rtol=1e-4, atol=1e-5)


def test_weighted_procrustes_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"\(\.\.\., N, 3\)"):
        lgr.weighted_procrustes(np.zeros((5, 3)), np.zeros((4, 3)))
    with pytest.raises(ValueError, match="weights"):
        lgr.weighted_procrustes(np.zeros((5, 3)), np.zeros((5, 3)), np.ones(4))


# ------------------------------------------------------------------ inlier counts
def test_inlier_counts_equal_torch():
    src, ref, _, _, gt = _correspondences(2, 40, 10)
    gen = torch.Generator().manual_seed(2)
    near = torch.from_numpy(gt) @ random_transform(
        gen, (30,), max_translation=0.05, dtype=torch.float64
    )
    transforms = np.concatenate([gt[None], near.numpy()]).astype(np.float32)
    for radius in (0.02, 0.1, 0.5):
        counts = lgr.inlier_counts(src, ref, transforms, radius)
        expected = torch_inlier_counts(_t(src), _t(ref), _t(transforms), radius)
        assert counts.dtype == np.int64
        np.testing.assert_array_equal(counts, expected.numpy())
    # the direct float64 evaluation of the same count
    moved = src.astype(np.float64) @ np.swapaxes(transforms[:, :3, :3], 1, 2).astype(np.float64)
    residual = np.linalg.norm(moved + transforms[:, None, :3, 3] - ref, axis=-1)
    np.testing.assert_array_equal(
        lgr.inlier_counts(src, ref, transforms, 0.1), (residual < 0.1).sum(1)
    )


# ------------------------------------------------------------------ local-to-global
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lgr_equals_torch(seed):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 12, 60)  # patches of 1 .. 11 correspondences, interleaved below
    src, ref, scores, patch, gt = _correspondences(seed, 60, counts)
    order = rng.permutation(len(patch))
    t, inliers = _compare(src[order], ref[order], scores[order], patch[order], 0.05)
    np.testing.assert_allclose(t, gt, atol=0.02)
    assert inliers.mean() > 0.5


def test_lgr_single_proposing_patch_equals_torch():
    """One patch with 3 correspondences, the others 1 or 2: only it proposes."""
    src, ref, scores, patch, _ = _correspondences(3, 8, [1, 2, 3, 2, 1, 2, 1, 2], outliers=0.0)
    _, inliers = _compare(src, ref, scores, patch, 0.05)
    assert inliers.sum() >= 3


def test_lgr_fallback_to_the_largest_patches_equals_torch():
    """No patch reaches min_correspondences: only the largest ones propose. Here those (4
    correspondences) are outliers and the smaller ones (3) exact, so the estimate is wrong,
    as torch's is: a smaller patch proposing would have found the motion."""
    counts = np.array([4, 3, 3, 4, 3, 3, 3, 4])
    src, ref, scores, patch, gt = _correspondences(4, 8, counts, outliers=0.0)
    rng = np.random.default_rng(4)
    bad = np.isin(patch, np.flatnonzero(counts == 4))
    ref[bad] = rng.uniform(-3, 3, (int(bad.sum()), 3)).astype(np.float32)
    t, _ = _compare(src, ref, scores, patch, 0.05, min_correspondences=5)
    assert np.abs(t - gt).max() > 0.1
    good, _ = _compare(src, ref, scores, patch, 0.05, min_correspondences=3)
    np.testing.assert_allclose(good, gt, atol=0.03)


def test_lgr_stops_refining_below_three_inliers_like_torch():
    src, ref, scores, patch, _ = _correspondences(5, 10, 6, outliers=0.0)
    # a radius below the 1 cm noise: the hypothesis keeps too few inliers to refine
    _, inliers = _compare(src, ref, scores, patch, 1e-3)
    assert inliers.sum() < 3


def test_lgr_without_correspondences_is_the_identity():
    empty = np.zeros((0, 3), np.float32)
    t, inliers = lgr.local_to_global_registration(
        empty, empty, np.zeros(0, np.float32), np.zeros(0, np.int64), 0.1
    )
    np.testing.assert_array_equal(t, np.eye(4, dtype=np.float32))
    assert t.dtype == np.float32
    assert inliers.shape == (0,) and inliers.dtype == np.bool_


@pytest.mark.parametrize("steps", [0, 1, 5])
def test_lgr_refinement_steps_equal_torch(steps):
    src, ref, scores, patch, _ = _correspondences(6, 30, 5)
    _compare(src, ref, scores, patch, 0.05, num_refinement_steps=steps)


# ------------------------------------------------------------------ the real pair
@pytest.mark.data
def test_real_pair_lgr_equals_the_network():
    """The network's correspondences for the demo pair through both estimators."""
    if not (DEMO / "src.npy").is_file():
        pytest.skip(f"real data not found at {DEMO}")
    from pcreg.registration.loading import load_network

    net = load_network("indoor").network
    model = net.model
    batch = net.collate([(np.load(DEMO / "src.npy"), np.load(DEMO / "ref.npy"))])
    with torch.no_grad():
        out = model(batch.pyramid, batch.feats, batch.batch_size)
    from pcreg.models.geotransformer.matcher import PatchPairs

    patches = PatchPairs(
        out.src_knn_points, out.ref_knn_points, out.src_knn_valid, out.ref_knn_valid,
        None, None, out.patch_batch,
    )  # fmt: skip
    corr = model.matcher.correspondences(out.matching_scores, patches)
    est = model.estimator
    src, ref = corr.src_points.numpy(), corr.ref_points.numpy()
    scores, patch = corr.scores.numpy(), corr.patch.numpy()
    t, inliers = _compare(
        src, ref, scores, patch, est.acceptance_radius,
        min_correspondences=est.min_correspondences, num_refinement_steps=est.refinement_steps,
    )  # fmt: skip
    np.testing.assert_allclose(t, out.transform[0].numpy(), rtol=0, atol=TRANSFORM_ATOL)
    np.testing.assert_array_equal(inliers, out.corr_inliers[0].numpy())
    assert inliers.sum() > 100
