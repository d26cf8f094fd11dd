"""The verifier: a distinctive fit registers, a chance fit or an unsupported one does not."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from pcreg.registration.verify import (
    MIN_AGREEMENT,
    REGISTERED_CONTRAST,
    agreement,
    perturbations,
    verify,
)


def _demo(shared_data):
    demo = shared_data / "geotransformer_repo" / "demo"
    src = np.load(demo / "src.npy").astype(np.float64)
    ref = np.load(demo / "ref.npy").astype(np.float64)
    return src, ref, np.load(demo / "gt.npy").astype(np.float64)


def test_perturbations_move_points_by_the_step(rng):
    pts = rng.normal(size=(500, 3)) * [2.0, 1.0, 0.5] + [10.0, -3.0, 2.0]
    step = 0.3
    for t in perturbations(pts, step):
        moved = pts @ t[:3, :3].T + t[:3, 3]
        assert np.allclose(t[:3, :3] @ t[:3, :3].T, np.eye(3))
        rms = np.sqrt(((moved - pts) ** 2).sum(1).mean())
        assert rms == pytest.approx(step, rel=1e-6)


def test_agreement_counts_the_weight_within_the_radius():
    src = np.zeros((4, 3))
    ref = np.array([[0.0, 0, 0], [0.05, 0, 0], [0.5, 0, 0], [2.0, 0, 0]])
    scores = np.array([1.0, 2.0, 3.0, 4.0])
    assert agreement(src, ref, scores, np.eye(4), 0.1) == pytest.approx(0.3)
    shift = np.eye(4)
    shift[0, 3] = 2.0  # moves every source point onto the last reference point
    assert agreement(src, ref, scores, shift, 0.1) == pytest.approx(0.4)
    assert agreement(src[:0], ref[:0], scores[:0], np.eye(4), 0.1) == 0.0


def test_the_truth_of_a_real_pair_registers(shared_data):
    src, ref, gt = _demo(shared_data)
    check = verify(src, ref, gt, 0.05)
    assert check.registered, check.reason
    assert check.contrast >= REGISTERED_CONTRAST + 0.05  # measured 0.43
    assert 0.35 < check.fitness < 0.65  # the pair's overlap: 0.47 at 1.5 voxels


@pytest.fixture(scope="module")
def demo_network():
    """The demo pair, and the shipped indoor network's correspondences on it."""
    from shared_paths import SHARED_DATA

    import pcreg

    if not (SHARED_DATA / "geotransformer_repo").is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA}")
    shared_data = SHARED_DATA
    src, ref, gt = _demo(shared_data)
    raw = pcreg.register(src, ref, model="indoor", icp=False)
    return src, ref, gt, (raw.src_corr_points, raw.ref_corr_points, raw.corr_scores)


@pytest.mark.parametrize("degrees", [90, 180])
def test_wrong_local_optima_of_a_real_pair_do_not_register(demo_network, degrees):
    """The truth turned about the vertical, then refined by ICP into its local optimum: the
    kind of wrong estimate a pipeline ends in. Such a pose can still be a sharp fit of a few
    walls (contrast 0.30-0.34 here): the network's correspondences are what reject it."""
    from pcreg.baselines import icp_refine

    src, ref, gt, net = demo_network
    turned = np.eye(4)
    turned[:3, :3] = Rotation.from_euler("z", degrees, degrees=True).as_matrix()
    wrong = icp_refine(src, ref, gt @ turned, 0.05, 100, tolerance=1e-8).transform
    assert np.degrees(np.arccos((np.trace(wrong[:3, :3].T @ gt[:3, :3]) - 1) / 2)) > 45
    check = verify(src, ref, wrong, 0.05, agreement(*net, wrong, 0.1))
    assert check.agreement < MIN_AGREEMENT
    assert not check.registered
    right = verify(src, ref, gt, 0.05, agreement(*net, gt, 0.1))
    assert right.registered, right.reason


def test_noise_in_a_room_does_not_register(shared_data, rng):
    """Uniform noise filling the room's box touches its walls everywhere: a fit, but not a
    distinctive one."""
    _, ref, _ = _demo(shared_data)
    lo, hi = ref.min(0), ref.max(0)
    noise = rng.uniform(lo, hi, (20000, 3))
    check = verify(noise, ref, np.eye(4), 0.05)
    assert check.inliers > 300  # it does touch the walls
    assert check.contrast < 0.1
    assert not check.registered
    assert "not distinctive" in check.reason


def test_agreement_below_the_minimum_is_a_reason(shared_data):
    src, ref, gt = _demo(shared_data)
    check = verify(src, ref, gt, 0.05, agreement=MIN_AGREEMENT / 2)
    assert not check.registered
    assert "correspondences do not support" in check.reason
    assert verify(src, ref, gt, 0.05, agreement=MIN_AGREEMENT).registered


def test_no_overlap_at_all(shared_data):
    src, ref, gt = _demo(shared_data)
    far = gt.copy()
    far[:3, 3] += 100.0
    check = verify(src, ref, far, 0.05)
    assert (check.inliers, check.registered) == (0, False)
    assert "no overlap" in check.reason


def test_one_batched_query_counts_as_thirteen_plain_ones(shared_data):
    """The fast path (13 placements in one multi-threaded k-d tree query, clouds voxelised by
    ICP and reused) gives exactly the counts of one query per placement on clouds voxelised
    here, for a right and two wrong estimates."""
    import open3d as o3d
    from scipy.spatial import cKDTree

    from pcreg.registration.verify import MAX_QUERY_POINTS, STEP_RADII

    src, ref, gt = _demo(shared_data)
    voxel, radius = 0.05, 0.075

    def down(points):
        cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
        return np.asarray(cloud.voxel_down_sample(voxel).points)

    s, r = down(src), down(ref)
    tree = cKDTree(r)
    q_src = s[:: -(-len(s) // MAX_QUERY_POINTS)] if len(s) > MAX_QUERY_POINTS else s

    def fitting(t):
        dist, _ = tree.query(q_src @ t[:3, :3].T + t[:3, 3], distance_upper_bound=radius)
        return int(np.isfinite(dist).sum())

    turn = np.eye(4)
    turn[:3, :3] = Rotation.from_euler("z", 30, degrees=True).as_matrix()
    for t in (gt, gt @ turn, np.eye(4)):
        plain = [t, *(t @ p for p in perturbations(q_src, STEP_RADII * radius))]
        counts = [fitting(q) for q in plain]
        for check in (verify(src, ref, t, voxel), verify(s, r, t, voxel, voxelised=True)):
            assert check.inliers == counts[0]
            if counts[0]:
                assert check.contrast == pytest.approx(1 - np.median(counts[1:]) / counts[0])


def test_measurements_of_the_fit_in_both_directions(rng):
    """A grid surface laid exactly on itself: every point fits both ways, closer than half a
    voxel; a third of it onto the whole: the part fits, a third of the whole is covered; the
    surface slid along itself keeps its fit one way (a slide: worst contrast near 0)."""
    u, v = np.meshgrid(np.arange(0, 4, 0.05), np.arange(0, 4, 0.05))
    plane = np.column_stack(
        [u.ravel(), v.ravel(), 0.3 * np.sin(u.ravel() * 1.7) * np.cos(v.ravel())]
    )
    same = verify(plane, plane, np.eye(4), 0.05)
    assert same.fitness == pytest.approx(1.0) and same.reverse_fitness == pytest.approx(1.0)
    assert same.fine_fitness > 0.95 and same.residual < 0.1 and same.residual_tail < 0.2
    third = plane[plane[:, 0] < 4 / 3]
    part = verify(third, plane, np.eye(4), 0.05)
    assert part.fitness == pytest.approx(1.0)
    assert part.reverse_fitness == pytest.approx(1 / 3, abs=0.03)
    flat = plane.copy()
    flat[:, 2] = 0.0  # a plane slides along itself: the worst direction keeps every point
    slide = verify(flat, flat, np.eye(4), 0.05)
    assert slide.worst_contrast < 0.05 < slide.contrast
    shifted = np.eye(4)
    shifted[2, 3] = 0.04  # half a radius off: still fits, no longer up close
    off = verify(plane, plane, shifted, 0.05)
    assert off.fitness > 0.9 and off.fine_fitness < 0.2 and off.residual > 0.4


def test_rotations_about_an_axis_are_scipys(rng):
    from scipy.spatial.transform import Rotation

    from pcreg.registration.verify import _rotation_about

    for rotvec in [*rng.normal(size=(20, 3)), np.zeros(3), np.array([0, 0, np.pi])]:
        want = Rotation.from_rotvec(rotvec).as_matrix()
        np.testing.assert_allclose(_rotation_about(rotvec), want, atol=1e-14)


@pytest.mark.open3d
@pytest.mark.data
def test_voxelising_here_is_open3ds_and_verifies_the_same(shared_data):
    """The verifier's own voxels are Open3D's (in another order); below
    :data:`~pcreg.registration.verify.MAX_QUERY_POINTS` voxels the order does not matter, and
    the verification of Open3D's voxels equals that of its own."""
    import open3d as o3d

    from pcreg.registration.verify import _voxelised

    src, ref, gt = _demo(shared_data)

    def o3d_down(points):
        cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
        return np.asarray(cloud.voxel_down_sample(0.05).points)

    def rows(a):
        return a[np.lexsort(a.T[::-1])]

    np.testing.assert_array_equal(rows(_voxelised(src, 0.05)), rows(o3d_down(src)))
    off = gt.copy()
    off[:3, 3] += 0.05
    for transform in (gt, off):
        ours = verify(src, ref, transform, 0.05)
        theirs = verify(o3d_down(src), o3d_down(ref), transform, 0.05, voxelised=True)
        assert (ours.inliers, ours.points) == (theirs.inliers, theirs.points)
        for name in ("contrast", "reverse_fitness", "residual", "residual_tail", "fine_fitness",
                     "worst_contrast"):  # fmt: skip
            assert getattr(ours, name) == pytest.approx(getattr(theirs, name), abs=1e-12), name
