"""Voxel downsampling, normals and the k-d tree without Open3D: the same voxel means as Open3D
bit for bit, the same normals (sign included), cKDTree's answers; on the real 3DMatch and KITTI
scans and on generated clouds."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg.geometry.clouds import (
    Cloud,
    KdTree,
    as_cloud,
    downsample_with_normals,
    estimate_normals,
    voxel_downsample,
)

o3d = pytest.importorskip("open3d")


def _rows(a: np.ndarray) -> np.ndarray:
    return a[np.lexsort(a.T[::-1])]


def _o3d_down(points: np.ndarray, voxel: float) -> np.ndarray:
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(points, np.float64)))
    return np.asarray(cloud.voxel_down_sample(voxel).points)


def _o3d_normals(points: np.ndarray, radius: float, max_nn: int = 30) -> np.ndarray:
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
    cloud.estimate_normals(o3d.geometry.KDTreeSearchParamHybrid(radius=radius, max_nn=max_nn))
    return np.asarray(cloud.normals)


def _real_scans(shared_data):
    """``(name, points (N, 3) float64, voxel)``: both scans of the real 3DMatch demo pair (5 cm)
    and of the KITTI pair 94/95 (0.3 m)."""
    from pcreg.bench.real_pairs import real_pairs
    from pcreg.io import read_points

    out = []
    for p in real_pairs(shared_data):
        if p.name in ("3DMatch 0<-6", "KITTI 95<-94"):
            voxel = 0.05 if p.setting == "indoor" else 0.3
            for path in (p.src, p.ref):
                out.append((p.name, read_points(path).astype(np.float64), voxel))
    assert len(out) == 4
    return out


def _generated(rng) -> np.ndarray:
    """A box room's floor and two walls, noisy, plus scattered points: planes, edges, corners
    and lone points (fewer than 3 neighbours)."""
    floor = np.c_[rng.uniform(0, 4, (4000, 2)), rng.normal(0, 0.004, 4000)]
    wall = np.c_[rng.uniform(0, 4, 2000), rng.normal(0, 0.004, 2000), rng.uniform(0, 2.5, 2000)]
    side = np.c_[rng.normal(4, 0.004, 2000), rng.uniform(0, 4, 2000), rng.uniform(0, 2.5, 2000)]
    stray = rng.uniform(-1, 5, (60, 3))
    return np.concatenate([floor, wall, side, stray]) + np.array([12.0, -3.0, 0.5])


def _angle_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.degrees(np.arccos(np.clip(np.abs(np.einsum("ij,ij->i", a, b)), 0.0, 1.0)))


@pytest.mark.parametrize("voxel", [0.05, 0.13, 0.3])
def test_voxel_means_are_open3ds_bit_for_bit_on_generated_clouds(rng, voxel):
    points = _generated(rng)
    ours = voxel_downsample(points, voxel)
    np.testing.assert_array_equal(_rows(ours), _rows(_o3d_down(points, voxel)))


@pytest.mark.open3d
@pytest.mark.data
def test_voxel_means_are_open3ds_bit_for_bit_on_real_scans(shared_data):
    for name, points, voxel in _real_scans(shared_data):
        ours = voxel_downsample(points, voxel)
        np.testing.assert_array_equal(_rows(ours), _rows(_o3d_down(points, voxel)), name)


def test_voxels_come_in_cell_order_whatever_the_input_order(rng):
    points = _generated(rng)
    a = voxel_downsample(points, 0.1)
    b = voxel_downsample(points[rng.permutation(len(points))], 0.1)
    np.testing.assert_allclose(a, b, atol=1e-12)  # the same rows in the same order
    cells = np.floor((a - (points.min(0) - 0.05)) / 0.1).astype(int)
    order = np.lexsort(cells.T[::-1])
    np.testing.assert_array_equal(order, np.arange(len(a)))


def test_voxel_downsample_edge_cases():
    assert voxel_downsample(np.zeros((0, 3)), 0.1).shape == (0, 3)
    np.testing.assert_array_equal(voxel_downsample(np.ones((4, 3)), 0.1), np.ones((1, 3)))
    with pytest.raises(ValueError, match="positive"):
        voxel_downsample(np.ones((4, 3)), 0.0)
    # a grid too fine to number in int64 (Open3D refuses it) still groups the cells
    far = np.array([[0.0, 0, 0], [0, 0, 1e-9], [1e7, 1e7, 1e7]])
    np.testing.assert_array_equal(voxel_downsample(far, 1e-3), [[0, 0, 5e-10], [1e7, 1e7, 1e7]])


@pytest.mark.parametrize("radius_voxels", [2.0, 2.5])
def test_normals_are_open3ds_with_its_signs_on_a_generated_room(rng, radius_voxels):
    down = voxel_downsample(_generated(rng), 0.05)
    ours = estimate_normals(down, radius_voxels * 0.05)
    theirs = _o3d_normals(down, radius_voxels * 0.05)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-12)
    assert _angle_deg(ours, theirs).max() < 1e-4
    assert (np.einsum("ij,ij->i", ours, theirs) > 0).all()  # Open3D's signs


@pytest.mark.open3d
@pytest.mark.data
@pytest.mark.parametrize("radius_voxels", [2.0, 2.5])
def test_normals_are_open3ds_with_its_signs_on_real_scans(shared_data, radius_voxels):
    """Within 1e-4 deg wherever at least 4 points make the neighbourhood; where 3 nearly
    collinear points make the plane the two roundings differ more (0.088 deg at one of the
    17k points of KITTI 94 at 0.3 m; Open3D's own error there, against the cross product of
    the three, is 0.13 deg), so those are held to 0.5 deg."""
    for name, points, voxel in _real_scans(shared_data):
        down = voxel_downsample(points, voxel)
        ours = estimate_normals(down, radius_voxels * voxel)
        theirs = _o3d_normals(down, radius_voxels * voxel)
        count = np.isfinite(KdTree(down).query(down, 30, radius_voxels * voxel)[0]).sum(1)
        angle = _angle_deg(ours, theirs)
        assert angle[count >= 4].max() < 1e-4, name
        assert angle.max() < 0.5, name
        assert (np.einsum("ij,ij->i", ours, theirs) > 0).all(), name


def test_normals_of_degenerate_neighbourhoods_are_open3ds():
    """Lone points and pairs get (0, 0, 1) as in Open3D; exact planes and a line get its
    directions (their signs follow rounding noise in the zero covariances, in both)."""
    points = np.array([[0.0, 0, 0], [5, 5, 5], [5.01, 5, 5], [9, 0, 0], [9.01, 0, 0], [9.02, 0, 0]])
    grid = np.stack(np.meshgrid(np.arange(4.0), np.arange(4.0), [0.0]), -1).reshape(-1, 3) * 0.01
    shift = np.array([10.0, 0, 0])
    planes = [grid + 2 * shift, grid[:, [2, 0, 1]] + 3 * shift, grid[:, [0, 2, 1]] + 4 * shift]
    points = np.concatenate([points, *planes])
    ours = estimate_normals(points, 0.05)
    theirs = _o3d_normals(points, 0.05)
    np.testing.assert_array_equal(ours[:3], theirs[:3])
    np.testing.assert_array_equal(ours[:3], [[0, 0, 1]] * 3)  # fewer than 3 neighbours
    assert _angle_deg(ours, theirs).max() < 1e-6
    for plane, axis in zip(range(3), (2, 0, 1), strict=True):  # the planes' own axes
        normals = ours[6 + 16 * plane : 6 + 16 * (plane + 1)]
        np.testing.assert_allclose(np.abs(normals[:, axis]), 1.0, atol=1e-9)


def test_kdtree_answers_as_ckdtree(rng):
    from scipy.spatial import cKDTree

    data = rng.uniform(0, 1, (2000, 3))
    queries = rng.uniform(-0.1, 1.1, (500, 3))
    ours, theirs = KdTree(data), cKDTree(data)
    for k, bound in ((1, np.inf), (1, 0.03), (8, 0.06), (30, 0.1)):
        d0, i0 = ours.query(queries, k, bound)
        d1, i1 = theirs.query(queries, k, distance_upper_bound=bound)
        np.testing.assert_allclose(d0, d1, rtol=1e-12)
        np.testing.assert_array_equal(i0, i1)
    d, i = KdTree(data[:3]).query(queries, k=5)  # more neighbours asked than points
    assert d.shape == (500, 5) and np.isinf(d[:, 3:]).all() and (i[:, 3:] == 3).all()
    d, i = KdTree(np.zeros((0, 3))).query(queries[:2])
    assert np.isinf(d).all() and (i == 0).all()
    # the bound is strict, as Open3D's hybrid search
    d, i = KdTree(np.array([[0.0, 0, 0], [1, 0, 0]])).query(np.zeros((1, 3)), 2, 1.0)
    assert np.isinf(d[0, 1]) and i[0, 1] == 2


def test_the_nearest_neighbour_search_runs_on_the_threads_asked(rng, monkeypatch):
    from threadpoolctl import ThreadpoolController

    from pcreg.geometry import clouds
    from pcreg.geometry.clouds import _openmp_threads

    tree = KdTree(rng.uniform(0, 1, (100, 3)))
    asked = []

    def spy(threads):
        asked.append(threads)
        return _openmp_threads(threads)

    monkeypatch.setattr(clouds, "_openmp_threads", spy)
    tree.query(rng.uniform(0, 1, (10, 3)), workers=3)  # loads pykdtree
    assert asked == [3]

    def pykdtree_threads() -> list[int]:
        info = ThreadpoolController().info()
        return [i["num_threads"] for i in info if "pykdtree" in i["filepath"]]

    before = pykdtree_threads()
    assert before  # threadpoolctl sees pykdtree's OpenMP runtime
    with _openmp_threads(1):
        assert pykdtree_threads() == [1]
    assert pykdtree_threads() == before


def test_clouds_convert_to_and_from_open3d(rng):
    down = downsample_with_normals(_generated(rng), 0.1)
    assert isinstance(down, Cloud) and down.has_normals() and len(down) == len(down.points)
    back = as_cloud(down.to_open3d())
    np.testing.assert_array_equal(back.points, down.points)
    np.testing.assert_array_equal(back.normals, down.normals)
    bare = as_cloud(o3d.geometry.PointCloud(o3d.utility.Vector3dVector(down.points)))
    assert not bare.has_normals()
    assert as_cloud(down) is down
    assert as_cloud(down.points).normals is None
