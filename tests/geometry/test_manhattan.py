"""Manhattan frames: the cube group, the frame of a rotated room, pair canonicalisation, and the
Registrar's orientation search (with an oracle standing in for a small-rotation network)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from pcreg.data.collate import PairBatch
from pcreg.geometry.manhattan import (
    CUBE_ROTATIONS,
    TooFewNormals,
    canonicalize_pair,
    estimate_manhattan_frame,
)
from pcreg.registration.loading import load_network
from pcreg.registration.network import Prediction, Registrar
from pcreg.registration.search import ManhattanHypotheses, OrientationSearch, SearchConfig


def _angle_deg(r: np.ndarray) -> np.ndarray:
    cos = (np.trace(r, axis1=-2, axis2=-1) - 1.0) / 2.0
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def _to_cube_deg(r: np.ndarray) -> float:
    """Angle (deg) from ``r (3, 3)`` to the nearest cube rotation."""
    return float(_angle_deg(np.einsum("ij,gkj->gik", r, CUBE_ROTATIONS)).min())


def test_cube_rotations_form_the_rotation_group_of_the_cube():
    assert CUBE_ROTATIONS.shape == (24, 3, 3)
    np.testing.assert_allclose(CUBE_ROTATIONS[0], np.eye(3))
    np.testing.assert_allclose(np.linalg.det(CUBE_ROTATIONS), 1.0)
    keys = {m.astype(int).tobytes() for m in CUBE_ROTATIONS}
    assert len(keys) == 24  # distinct
    for a in CUBE_ROTATIONS[::5]:  # closed under products
        for b in CUBE_ROTATIONS[::3]:
            assert (a @ b).astype(int).tobytes() in keys


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_frame_of_a_rotated_room_is_its_axes_up_to_a_cube_rotation(room_pair, seed):
    _, ref, _ = room_pair  # the demo room's crop: floor, walls, boxes, axis-aligned
    rot = Rotation.random(random_state=seed).as_matrix()
    frame = estimate_manhattan_frame(ref @ rot.T)
    # frame.rotation @ rot maps the room's own axes onto the frame's: a cube rotation
    assert _to_cube_deg(frame.rotation @ rot) < 2.0
    assert np.linalg.det(frame.rotation) == pytest.approx(1.0)
    assert frame.support[0] >= frame.support[1] > 0.1  # floor / walls carry the most normals


def test_frame_fails_loudly_on_too_few_points():
    with pytest.raises(ValueError, match="too few points"):
        estimate_manhattan_frame(np.zeros((5, 3)))
    # 200 points 1 m apart: none has a normal at 5 cm voxels
    spread = np.stack(np.meshgrid(*[np.arange(6.0)] * 3), -1).reshape(-1, 3)[:200]
    with pytest.raises(TooFewNormals, match="0 of 200 voxels have a normal"):
        estimate_manhattan_frame(spread)


def test_points_without_a_normal_do_not_make_a_frame():
    """Uniform noise, 6,000 points in a 3 m box (8 cm apart, 5 cm voxels): most voxels have
    under 3 neighbours and no normal. Counted as Open3D's placeholder (0, 0, 1), they held
    half the cloud on one axis (support 0.52 > 0.3) and the orientation search ran 17 network
    hypotheses on it; without them the axes hold 6 %, and the search does not apply."""
    noise = np.random.default_rng(0).uniform(0, 3, (6000, 3))
    frame = estimate_manhattan_frame(noise)
    assert frame.support.sum() < ManhattanHypotheses.MIN_SUPPORT / 2
    assert ManhattanHypotheses(0.05).propose(noise, noise[::-1]) is None
    assert ManhattanHypotheses(0.05).propose(noise[:50] * 20, noise) is None  # no frame at all


def test_canonicalized_pair_is_a_small_rotation_apart_and_keeps_the_ground_truth(room_pair):
    src, ref, gt = room_pair
    rot = Rotation.random(random_state=7).as_matrix()
    src_r = (src @ rot.T).astype(np.float32)  # any rotation of the source
    gt_r = gt.copy()
    gt_r[:3, :3] = gt[:3, :3] @ rot.T
    assert _angle_deg(gt_r[:3, :3]) > 20.0
    src_c, ref_c, t = canonicalize_pair(src_r, ref, gt_r, rng=np.random.default_rng(0))
    assert ref_c.dtype == ref.dtype and src_c.dtype == np.float32
    assert _angle_deg(t[:3, :3]) < 3.0  # only the estimates' residual is left
    # ref' = T' src' for the moved points: compare with the original ground truth
    moved = src_c.astype(np.float64) @ t[:3, :3].T + t[:3, 3]
    want = src_r.astype(np.float64) @ gt_r[:3, :3].T + gt_r[:3, 3]  # in ref's frame
    frame_ref = np.linalg.lstsq(ref.astype(np.float64), ref_c.astype(np.float64), rcond=None)[0]
    np.testing.assert_allclose(moved, want @ frame_ref, atol=1e-3)
    # the reference is axis-aligned (its Manhattan axes are the coordinate axes)
    assert _to_cube_deg(estimate_manhattan_frame(ref_c).rotation) < 2.0


def _open3d_frame_normals(
    points: np.ndarray, voxel: float, workers: int = 1
) -> tuple[np.ndarray, np.ndarray, int]:
    """The frame's voxels and normals as Open3D computes them: the reference of
    :func:`pcreg.geometry.manhattan._normals` (a voxel with under 3 points within the normals'
    radius, by Open3D's own k-d tree, has no normal and is left out)."""
    o3d = pytest.importorskip("open3d")
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(points, np.float64)))
    down = np.asarray(cloud.voxel_down_sample(voxel).points, np.float64)
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(down[np.lexsort(down.T[::-1])]))
    cloud.estimate_normals(o3d.geometry.KDTreeSearchParamHybrid(radius=2.5 * voxel, max_nn=30))
    pts, normals = np.asarray(cloud.points), np.asarray(cloud.normals)
    normals[np.einsum("ij,ij->i", normals, pts.mean(0) - pts) < 0] *= -1.0
    tree = o3d.geometry.KDTreeFlann(cloud)
    count = [tree.search_hybrid_vector_3d(p, 2.5 * voxel, 30)[0] for p in pts]
    keep = np.asarray(count) >= 3
    return pts[keep], normals[keep], len(pts)


def _assert_frame_as_open3ds(points: np.ndarray, voxel: float = 0.05) -> None:
    from pcreg.geometry.manhattan import _normals

    pts, normals, voxels = _normals(points, voxel)
    want_pts, want_normals, want_voxels = _open3d_frame_normals(points, voxel)
    assert voxels == want_voxels
    np.testing.assert_array_equal(pts, want_pts)  # the same voxels in the same order
    cos = np.einsum("ij,ij->i", normals, want_normals)
    assert np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))).max() < 1e-4  # signs included
    frame = estimate_manhattan_frame(points, voxel)
    # the frame Open3D's normals give, with the same seeded draw
    import pcreg.geometry.manhattan as manhattan

    saved = manhattan._normals
    try:
        manhattan._normals = _open3d_frame_normals
        want = estimate_manhattan_frame(points, voxel)
    finally:
        manhattan._normals = saved
    np.testing.assert_allclose(frame.rotation, want.rotation, atol=1e-9)
    np.testing.assert_allclose(frame.support, want.support, atol=1e-12)


def test_frame_normals_are_open3ds_on_the_generated_room(room_pair):
    src, ref, _ = room_pair
    _assert_frame_as_open3ds(ref)
    _assert_frame_as_open3ds(src)


@pytest.mark.open3d
@pytest.mark.data
def test_frame_normals_are_open3ds_on_the_real_3dmatch_pair(shared_data):
    demo = shared_data / "geotransformer_repo" / "demo"
    for name in ("src.npy", "ref.npy"):
        _assert_frame_as_open3ds(np.load(demo / name).astype(np.float64))


class _SmallRotationOracle(Registrar):
    """Stands in for a network trained on small rotations: given the clouds' point-by-point
    correspondence (the pair shares its points), it returns the exact transform with those
    correspondences when the source is within 20 deg of the reference, else a wrong guess
    whose correspondences disagree with it."""

    def __init__(
        self, src_index: np.ndarray, acceptance_radius: float = 0.1, keep: float = 0.0
    ) -> None:
        from pcreg.models.geotransformer import GeoTransformerConfig

        self._config = GeoTransformerConfig(acceptance_radius=acceptance_radius)
        self.search = OrientationSearch.from_config(
            self, SearchConfig("manhattan", orientation_keep=keep)
        )
        self.src_index = src_index
        self.calls = 0

    @property
    def config(self):
        return self._config

    def hypotheses(self, src_c, ref, rotations):
        import torch

        from pcreg.geometry import weighted_procrustes

        preds = []
        for rot in rotations:
            src = src_c @ rot.T
            self.calls += 1
            r, s = ref[: len(self.src_index)], src[self.src_index]
            t = weighted_procrustes(
                torch.from_numpy(s), torch.from_numpy(r), torch.ones(len(r), dtype=torch.float64)
            ).numpy()
            if _angle_deg(t[:3, :3]) > 20.0:  # out of its range: a confident wrong answer
                t = np.eye(4)
                t[:3, 3] = r.mean(0) - s.mean(0)
            preds.append(Prediction(t, s, r, np.ones(len(r)), 0.0))
        return preds


@pytest.mark.parametrize("keep", [0.0, 0.7])
def test_orientation_search_recovers_any_rotation_with_a_small_rotation_model(room_pair, keep):
    """All 24 hypotheses (keep 0), or only the ones the pre-network ranking keeps: the same
    transform, from fewer network calls."""
    _, ref, _ = room_pair
    ref = ref[::3].astype(np.float64)  # a third of the points: the hypotheses are under test
    n = len(ref)
    rng = np.random.default_rng(3)
    for seed in range(4):
        rot = Rotation.random(random_state=seed).as_matrix()
        gt = np.eye(4)
        gt[:3, :3], gt[:3, 3] = rot.T, rng.uniform(-1, 1, 3)
        # source: the reference moved by gt^-1 and shuffled; index maps source -> reference
        perm = rng.permutation(n)
        src = (ref[perm] - gt[:3, 3]) @ gt[:3, :3]
        oracle = _SmallRotationOracle(np.argsort(perm), keep=keep)
        pred = oracle.search(src, ref).prediction
        if keep == 0.0:
            assert oracle.calls == 24
        else:  # the whole room against itself: the right hypothesis is the clear winner
            assert 1 <= oracle.calls <= 3
        np.testing.assert_allclose(pred.transform, gt, atol=1e-6)
        # correspondences come back in the caller's frames
        np.testing.assert_allclose(pred.ref_corr_points, ref, atol=1e-9)
        np.testing.assert_allclose(pred.src_corr_points, src[np.argsort(perm)], atol=1e-9)


def test_hypotheses_rotate_the_source_of_one_shared_pyramid(tiny_checkpoint, room_pair):
    src, ref, _ = room_pair
    reg = load_network(tiny_checkpoint).network
    rots = CUBE_ROTATIONS[[0, 5]]
    same, turned = reg.hypotheses(src, ref, rots)
    # the identity hypothesis is exactly the plain forward pass
    plain = reg.forward([(src, ref)])[0]
    np.testing.assert_allclose(same.transform, plain.transform, atol=1e-5)
    np.testing.assert_allclose(same.src_corr_points, plain.src_corr_points, atol=1e-5)
    # the other hypothesis saw the rotated source: its correspondences lie on it
    from scipy.spatial import cKDTree

    on_rotated = cKDTree(src @ rots[1].T).query(turned.src_corr_points)[0]
    assert len(on_rotated) > 0 and np.median(on_rotated) < 0.05
    assert np.median(cKDTree(src).query(turned.src_corr_points)[0]) > 0.1
    # and it equals the network run from scratch on that pyramid (no cached reference features
    # or embeddings: the cached source embedding was computed on the unrotated source)
    batch = reg.collate([(src, ref)])
    k = [int(n[0]) for n in batch.pyramid.lengths]
    r = torch.as_tensor(rots[1], dtype=torch.float32)
    points = [torch.cat([p[:n], p[n:] @ r.T]) for p, n in zip(batch.pyramid.points, k, strict=True)]
    scratch = reg._run(PairBatch(batch.pyramid._replace(points=points), batch.feats, 1), 0.0)[0]
    np.testing.assert_allclose(turned.transform, scratch.transform, atol=1e-5)
    np.testing.assert_allclose(turned.corr_scores, scratch.corr_scores, atol=1e-5)


def test_consensus_counts_the_confidence_of_agreeing_correspondences():
    pts = np.arange(12, dtype=np.float64).reshape(4, 3)
    moved = pts + np.array([[0, 0, 0], [0, 0, 0.05], [0, 0, 0.5], [3, 0, 0]])
    pred = Prediction(np.eye(4), pts, moved, np.array([0.5, 0.25, 1.0, 1.0]), 0.0)
    assert pred.consensus(0.1) == pytest.approx(0.75)
    assert pred.consensus(1.0) == pytest.approx(1.75)
    empty = Prediction(np.eye(4), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), 0.0)
    assert empty.consensus(0.1) == 0.0


def test_an_unknown_orientation_search_is_refused():
    with pytest.raises(ValueError, match="orientation_search"):
        SearchConfig(orientation_search="gravity")
