"""Ranking the cube hypotheses by channel-wise occupancy correlation: the spectral shortcut
equals gridding each rotated source from scratch, and on a real-looking room the right
hypothesis ranks first."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.fft import next_fast_len
from scipy.spatial.transform import Rotation

from pcreg.geometry.cube_ranking import (
    _channel_source,
    _grid_indices,
    _occupancy,
    cube_hypothesis_scores,
    grid_voxel,
    normal_channels,
)
from pcreg.geometry.manhattan import CUBE_ROTATIONS, estimate_manhattan_frame


def _direct_scores(src, src_n, ref, ref_n, voxel):
    """Plain version: grid the source, rotate its voxel indices and normals, correlate channel
    by channel with ``numpy.fft`` (float64) on a grid sized for this rotation alone,
    normalise, take the peak."""
    out = []
    ri = np.floor((ref - ref.min(0)) / voxel).astype(int)
    si0 = np.floor((src - src.min(0)) / voxel).astype(int)
    for rot in CUBE_ROTATIONS:
        si = si0 @ rot.T.astype(int)
        si -= si.min(0)
        sn = src_n @ rot.T
        n = next_fast_len(2 * (max(ri.max(), si.max()) + 1))
        a = np.zeros((6, n, n, n))
        b = np.zeros((6, n, n, n))
        a[(normal_channels(ref_n), *ri.T)] = 1.0
        b[(normal_channels(sn), *si.T)] = 1.0
        total = np.zeros((n, n, n))
        for c in range(6):
            w = 1.0 / np.sqrt(max(a[c].sum() * b[c].sum(), 1.0))
            fa, fb = np.fft.fftn(a[c]), np.fft.fftn(b[c])
            total += w * np.fft.ifftn(fa * np.conj(fb)).real
        out.append(total.max())
    return np.array(out)


def test_normal_channels_are_signed_axes():
    normals = np.array(
        [[1, 0.1, 0], [-1, 0, 0.2], [0, 0.9, 0.1], [0, -1, 0], [0, 0, 1], [0.1, 0, -1]]
    )
    np.testing.assert_array_equal(normal_channels(normals), [1, 0, 3, 2, 5, 4])


def test_spectral_rotation_equals_gridding_each_rotated_source():
    rng = np.random.default_rng(0)
    ref = rng.uniform(0, 1.2, (300, 3))
    src = rng.uniform(-0.5, 0.9, (250, 3))
    ref_n = rng.normal(size=(300, 3))
    src_n = rng.normal(size=(250, 3))
    fast = cube_hypothesis_scores(src, src_n, ref, ref_n, voxel=0.1)
    slow = _direct_scores(src, src_n, ref, ref_n, voxel=0.1)
    np.testing.assert_allclose(fast, slow, rtol=1e-4, atol=1e-4)
    assert np.ptp(fast) > 0.05  # the hypotheses do differ: the check can fail


def _canonical_scores(src, ref, gt):
    """Ranking scores of a pair as the Manhattan hypothesis source computes them, and the
    index of the cube rotation the ground truth ``ref = gt @ src`` leaves between the canonical
    clouds."""
    f_ref = estimate_manhattan_frame(ref, voxel=0.05)
    f_src = estimate_manhattan_frame(src, voxel=0.05)
    scores = cube_hypothesis_scores(
        f_src.points @ f_src.rotation.T,
        f_src.normals @ f_src.rotation.T,
        f_ref.points @ f_ref.rotation.T,
        f_ref.normals @ f_ref.rotation.T,
        voxel=0.2,
    )
    rel = f_ref.rotation @ gt[:3, :3] @ f_src.rotation.T
    return scores, int(np.argmax(np.einsum("ij,gij->g", rel, CUBE_ROTATIONS)))


def test_the_true_cube_rotation_ranks_first_on_real_3dmatch_pairs(shared_data):
    from pcreg.bench.real_pairs import real_pairs
    from pcreg.io import read_points

    pairs = [p for p in real_pairs(shared_data) if p.setting == "indoor"]
    assert len(pairs) == 2
    rng = np.random.default_rng(0)
    for p in pairs:
        src, ref = read_points(p.src).astype(np.float64), read_points(p.ref)
        turn = Rotation.random(random_state=rng).as_matrix()
        gt = np.asarray(p.gt, np.float64).copy()
        gt[:3, :3] = gt[:3, :3] @ turn.T  # ref = gt' @ (turn @ src)
        scores, truth = _canonical_scores(src @ turn.T, ref, gt)
        assert int(np.argmax(scores)) == truth, p.name
        assert scores[truth] > 1.1 * np.sort(scores)[-2], p.name  # a clear winner


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_symmetric_box_room_keeps_the_truth_among_a_few(room_pair, seed):
    """The demo's toy room is a bare 4 x 3 m box with two boxes in it: several cube rotations
    fit its crops about as well, and the truth need not rank first. It must stay within the
    shipped ``orientation_keep`` (0.7 x the best) while most hypotheses are pruned."""
    src, ref, gt = room_pair
    turn = Rotation.random(random_state=seed).as_matrix()
    gt = gt.copy()
    gt[:3, :3] = gt[:3, :3] @ turn.T
    scores, truth = _canonical_scores(src.astype(np.float64) @ turn.T, ref, gt)
    assert scores[truth] >= 0.7 * scores.max()
    assert (scores >= 0.7 * scores.max()).sum() <= 10


def test_scores_do_not_depend_on_where_the_clouds_sit():
    rng = np.random.default_rng(4)
    ref = rng.uniform(0, 1, (200, 3))
    normals = rng.normal(size=(200, 3))
    a = cube_hypothesis_scores(ref, normals, ref, normals, voxel=0.1)
    b = cube_hypothesis_scores(ref - 2.0, normals, ref + 5.03, normals, voxel=0.1)
    np.testing.assert_allclose(a, b, rtol=1e-5)
    assert int(np.argmax(a)) == 0  # a cloud overlaps itself best unrotated


def test_a_large_scan_gets_a_coarser_grid_not_a_huge_one():
    from pcreg.geometry.cube_ranking import MAX_CELLS, grid_voxel

    rng = np.random.default_rng(5)
    room = rng.uniform(0, 6, (500, 3))
    assert grid_voxel(room, room, 0.2) == 0.2  # a room keeps the requested cells
    street = rng.uniform(0, 100, (500, 3))
    voxel = grid_voxel(street[:100], street, 0.2)
    assert voxel == pytest.approx(np.ptp(street, 0).max() / (MAX_CELLS - 1))
    assert np.floor(np.ptp(street, 0) / voxel).max() + 1 <= MAX_CELLS
    # and it still ranks: a cloud against a shifted copy of part of itself, unrotated first
    normals = rng.normal(size=(500, 3))
    scores = cube_hypothesis_scores(street[:300] + 7.0, normals[:300], street, normals)
    assert int(np.argmax(scores)) == 0
    assert scores[0] > 1.5 * np.sort(scores)[-2]


def _torch_scores(src, src_n, ref, ref_n, voxel=0.2):
    """The ranking as pcreg computed it with torch before the numpy port (one forward FFT per
    reversal pattern of the axes, the grids flipped in space), float32: the reference."""
    torch = pytest.importorskip("torch")

    ref, src = np.asarray(ref, np.float64), np.asarray(src, np.float64)
    voxel = grid_voxel(src, ref, voxel)
    ref_idx, src_idx = _grid_indices(ref, voxel), _grid_indices(src, voxel)
    n = next_fast_len(2 * (int(max(ref_idx.max(), src_idx.max())) + 1))
    ref_grid = torch.from_numpy(_occupancy(ref_idx, normal_channels(ref_n), n))
    src_grid = torch.from_numpy(_occupancy(src_idx, normal_channels(src_n), n))
    ref_norm = torch.clamp(ref_grid.sum((1, 2, 3)), min=1.0).rsqrt()[:, None, None, None]
    src_norm = torch.clamp(src_grid.sum((1, 2, 3)), min=1.0).rsqrt()[:, None, None, None]
    ref_spec = torch.fft.rfftn(ref_grid * ref_norm, dim=(1, 2, 3)).conj()
    src_grid = src_grid * src_norm
    scores = np.zeros(len(CUBE_ROTATIONS))
    spectra = {}
    for i, rot in enumerate(CUBE_ROTATIONS):
        perm = np.abs(rot).argmax(1)
        sign = np.sign(rot[np.arange(3), perm])
        axes = tuple(sorted(1 + int(perm[j]) for j in range(3) if sign[j] < 0))
        if axes not in spectra:
            flipped = src_grid.flip(axes) if axes else src_grid
            spectra[axes] = torch.fft.fftn(flipped, dim=(1, 2, 3))
        spec = spectra[axes].permute(0, *(1 + int(p) for p in perm))[..., : n // 2 + 1]
        cross = torch.einsum("cxyz,cxyz->xyz", spec[_channel_source(rot)], ref_spec)
        scores[i] = float(torch.fft.irfftn(cross, s=(n, n, n), dim=(0, 1, 2)).max())
    return scores


def test_scores_equal_the_torch_ranking_on_random_clouds():
    rng = np.random.default_rng(11)
    for n_src, n_ref, size in ((250, 300, 1.2), (800, 600, 3.0), (400, 2000, 5.0)):
        ref = rng.uniform(0, size, (n_ref, 3))
        src = rng.uniform(-0.5, size * 0.8, (n_src, 3))
        ref_n, src_n = rng.normal(size=(n_ref, 3)), rng.normal(size=(n_src, 3))
        ours = cube_hypothesis_scores(src, src_n, ref, ref_n, voxel=0.1)
        np.testing.assert_allclose(ours, _torch_scores(src, src_n, ref, ref_n, 0.1), rtol=1e-5)


@pytest.mark.data
def test_scores_equal_the_torch_ranking_on_the_real_3dmatch_pair(shared_data):
    demo = shared_data / "geotransformer_repo" / "demo"
    src = np.load(demo / "src.npy").astype(np.float64)
    ref = np.load(demo / "ref.npy").astype(np.float64)
    f_src, f_ref = estimate_manhattan_frame(src), estimate_manhattan_frame(ref)
    args = (
        f_src.points @ f_src.rotation.T,
        f_src.normals @ f_src.rotation.T,
        f_ref.points @ f_ref.rotation.T,
        f_ref.normals @ f_ref.rotation.T,
    )
    for voxel in (0.2, 0.1):
        ours = cube_hypothesis_scores(*args, voxel=voxel)
        np.testing.assert_allclose(ours, _torch_scores(*args, voxel=voxel), rtol=1e-5)
        assert np.ptp(ours) > 0.1 * ours.max()  # the hypotheses do differ


def test_next_fast_len_is_scipys():
    from pcreg.geometry.cube_ranking import next_fast_len as ours

    for n in [*range(1, 300), 1021, 4097]:
        assert ours(n) == next_fast_len(n), n
