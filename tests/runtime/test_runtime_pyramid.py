"""The torch-free pyramid and partition (pcreg.runtime) against the torch path they replace.

(Not named test_pyramid.py: tests/ has no __init__.py files, so a second test_pyramid module
beside tests/ops/test_pyramid.py would stop pytest's collection.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from pcreg.data.collate import collate_pairs
from pcreg.ops.grid_subsample import grid_subsample as torch_grid_subsample
from pcreg.ops.neighbors import radius_search
from pcreg.ops.partition import point_to_node_partition as torch_partition
from pcreg.ops.pyramid import pyramid_items
from pcreg.runtime.partition import patch_points, point_to_node_partition
from pcreg.runtime.pyramid import (
    CloudPyramid,
    build_cloud_pyramid,
    grid_subsample,
    radius_neighbors,
    voxelise_and_build,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def shipped_configs():
    """The configs of the shipped indoor and outdoor networks (``GeoTransformerConfig``)."""
    from pcreg.registration.loading import load_network

    return {name: load_network(name).network.config for name in ("indoor", "outdoor")}


def small_config(**kw):
    """A small pyramid config (what collate_pairs and voxelise_and_build read)."""
    base = dict(
        voxel_size=0.025,
        num_stages=4,
        search_radius=0.0625,
        neighbor_limits=(20, 25, 30, 35),
        input_features="ones",
        fpfh_radii=(0.1, 0.25),
    )
    return SimpleNamespace(**{**base, **kw})


def surface_cloud(rng: np.random.Generator, n: int = 4000, size: float = 1.5) -> np.ndarray:
    """Raw points on the floor and two walls of a room corner, with a little noise (float32)."""
    pts = rng.random((n, 3)) * size
    pts[: n // 3, 2] = 0.0
    pts[n // 3 : 2 * n // 3, 0] = 0.0
    pts[2 * n // 3 :, 1] = 0.0
    pts += rng.normal(scale=0.002, size=pts.shape)
    return pts.astype(np.float32)


# ----------------------------------------------------------------------------- comparison
def assert_same_neighbors(got: np.ndarray, want: np.ndarray, shadow: int, what: str) -> None:
    """Same neighbor set in every row (the valid indices, sorted); the torch side may have
    extra all-shadow columns. ``got`` must be int64, shadow-padded at the end of each row."""
    assert got.dtype == np.int64, what
    assert got.shape[0] == want.shape[0], what
    assert got.min(initial=0) >= 0 and got.max(initial=0) <= shadow, what
    assert not (got[:, :-1] == shadow)[got[:, 1:] != shadow].any(), f"{what}: shadow mid-row"
    width = max(got.shape[1], want.shape[1])

    def canon(a: np.ndarray) -> np.ndarray:
        a = np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=shadow)
        return np.sort(a, axis=1)

    bad = np.nonzero((canon(got) != canon(want)).any(axis=1))[0]
    assert bad.size == 0, f"{what}: {bad.size} rows differ, first {bad[:5].tolist()}"


def assert_nearest_first(idx: np.ndarray, query: np.ndarray, support: np.ndarray) -> None:
    padded = np.vstack([support, np.zeros((1, 3), support.dtype)]).astype(np.float64)
    d = np.linalg.norm(padded[idx] - query.astype(np.float64)[:, None], axis=-1)
    real = idx < support.shape[0]
    step = np.diff(d, axis=1)[real[:, 1:]]  # shadow columns only trail real ones
    assert (step >= -1e-6).all(), "rows not nearest first"


def assert_pyramid_matches_torch(pyr: CloudPyramid, want) -> None:
    """``pyr`` (numpy) equals ``want`` (a one-item torch ``Pyramid``)."""
    stages = len(want.points)
    assert len(pyr.points) == len(pyr.neighbors) == stages
    assert len(pyr.subsampling) == len(pyr.upsampling) == stages - 1
    pts = [p.numpy() for p in want.points]
    for i in range(stages):
        assert pyr.points[i].dtype == np.float32
        assert pyr.points[i].shape == pts[i].shape, f"stage {i}"
        np.testing.assert_allclose(pyr.points[i], pts[i], rtol=0, atol=1e-6)
    n = [p.shape[0] for p in pts]
    for i in range(stages):
        assert_same_neighbors(pyr.neighbors[i], want.neighbors[i].numpy(), n[i], f"neighbors[{i}]")
        assert_nearest_first(pyr.neighbors[i], pyr.points[i], pyr.points[i])
    for i in range(stages - 1):
        sub, up = want.subsampling[i].numpy(), want.upsampling[i].numpy()
        assert_same_neighbors(pyr.subsampling[i], sub, n[i], f"subsampling[{i}]")
        assert_same_neighbors(pyr.upsampling[i], up, n[i + 1], f"upsampling[{i}]")
        np.testing.assert_array_equal(pyr.upsampling[i][:, 0], up[:, 0], f"upsampling[{i}][:, 0]")
        assert_nearest_first(pyr.upsampling[i], pyr.points[i], pyr.points[i + 1])


def check_pair(src: np.ndarray, ref: np.ndarray, cfg) -> None:
    """The numpy pyramid of each cloud equals its item of the torch path's pair batch."""
    batch = collate_pairs([torch.from_numpy(src)], [torch.from_numpy(ref)], cfg)
    for item, cloud in ((0, ref), (1, src)):  # references first
        want = pyramid_items(batch.pyramid, item, item + 1)
        assert_pyramid_matches_torch(voxelise_and_build(cloud, cfg), want)


def check_partition(points: np.ndarray, nodes: np.ndarray, limit: int, valid=None) -> None:
    """Equal to the torch function: node_valid and knn_valid exactly, knn_indices as sets per
    patch (the order within a patch may differ where the torch path's float32 distances
    reorder two points within their rounding), nearest first."""
    node_valid, idx, knn_valid = point_to_node_partition(points, nodes, limit, valid)
    t_valid = None if valid is None else torch.from_numpy(valid)
    want = torch_partition(torch.from_numpy(points), torch.from_numpy(nodes), limit, t_valid)
    w_node_valid, w_idx, w_knn_valid = (t.numpy() for t in want)
    n = points.shape[0]
    assert node_valid.dtype == knn_valid.dtype == bool and idx.dtype == np.int64
    assert idx.shape == w_idx.shape == (nodes.shape[0], limit)
    np.testing.assert_array_equal(node_valid, w_node_valid)
    np.testing.assert_array_equal(knn_valid, w_knn_valid)
    np.testing.assert_array_equal(knn_valid, idx < n)
    assert_same_neighbors(idx, w_idx, n, "knn_indices")
    assert_nearest_first(idx, nodes, points)
    # knn_points (Patches.knn_points): zeros where invalid
    padded = torch.cat([torch.from_numpy(points), torch.zeros(1, 3)], 0)
    np.testing.assert_array_equal(patch_points(points, idx), padded[torch.from_numpy(idx)].numpy())


# ----------------------------------------------------------------------------- grid subsampling
@pytest.mark.parametrize("n", [1, 7, 3000])
@pytest.mark.parametrize("voxel", [0.05, 0.3])
@pytest.mark.parametrize("offset", [0.0, 1000.0])
def test_grid_subsample_equals_torch(n, voxel, offset, rng):
    pts = (rng.random((n, 3)) * 3.0 + offset).astype(np.float32)
    got = grid_subsample(pts, voxel)
    want, _ = torch_grid_subsample(torch.from_numpy(pts), None, voxel)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want.numpy())


def test_grid_subsample_quantised_input_and_empty():
    """Points on a 2 mm lattice (like 3DMatch's), many on 5 cm multiples; and no points."""
    rng = np.random.default_rng(5)
    pts = (rng.integers(0, 500, size=(5000, 3)) * 0.002).astype(np.float32)
    want, _ = torch_grid_subsample(torch.from_numpy(pts), None, 0.05)
    np.testing.assert_array_equal(grid_subsample(pts, 0.05), want.numpy())
    assert grid_subsample(np.zeros((0, 3), np.float32), 0.05).shape == (0, 3)
    with pytest.raises(ValueError, match="voxel_size"):
        grid_subsample(pts, 0.0)


# ----------------------------------------------------------------------------- radius search
def test_radius_is_inclusive_and_capped_nearest_first():
    """A 0.25 m lattice and r = 0.5 m: the 6 points at exactly r are inside (33 in all around an
    interior point), as in the torch path; a cap keeps the nearest."""
    g = np.arange(6, dtype=np.float32) * 0.25
    pts = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    got = radius_neighbors(pts, pts, 0.5, 40)
    for backend in ("reference", "open3d"):
        if backend == "open3d":
            pytest.importorskip("open3d")
        want = radius_search(
            torch.from_numpy(pts), torch.from_numpy(pts), 0.5, max_neighbors=40, backend=backend
        )
        assert_same_neighbors(got, want.indices.numpy(), len(pts), backend)
    centre = int(np.nonzero((pts == 0.5).all(1))[0][0])
    assert (got[centre] < len(pts)).sum() == 33
    capped = radius_neighbors(pts, pts, 0.5, 7)  # self + the 6 at 0.25 m
    assert capped.shape == (len(pts), 7)
    np.testing.assert_array_equal(np.sort(capped[centre]), np.sort(got[centre][:7]))
    assert_nearest_first(got, pts, pts)
    # no support: all shadow; a wider cap than the cloud: shadow columns
    assert (radius_neighbors(pts[:3], pts[:0], 0.5, 4) == 0).all()
    assert radius_neighbors(pts[:2], pts[:2], 10.0, 5).tolist() == [
        [0, 1, 2, 2, 2],
        [1, 0, 2, 2, 2],
    ]


def test_radius_border_is_decided_in_float32_like_the_torch_path():
    """float32(0.1) is 1.5e-9 m beyond r = 0.1 m in float64 but on the radius in float32, where
    the torch path (the open3d backend on the CPU, torch without Open3D) decides: it is inside;
    float32(0.1000001) is outside either way. (The test-only ``reference`` backend decides in
    float64 and leaves it out.)"""
    query = np.zeros((1, 3), np.float32)
    support = np.array([[0.1, 0, 0], [0, 0.1000001, 0]], np.float32)
    assert float(support[0, 0]) > 0.1
    got = radius_neighbors(query, support, 0.1, 2)
    assert got.tolist() == [[0, 2]]
    for backend in ("torch", "open3d"):
        if backend == "open3d":
            pytest.importorskip("open3d")
        q, s = torch.from_numpy(query), torch.from_numpy(support)
        want = radius_search(q, s, 0.1, max_neighbors=2, backend=backend).indices
        assert want.tolist() == got.tolist(), backend


# ----------------------------------------------------------------------------- pyramids
def test_pyramid_equals_torch_on_a_small_cloud(rng):
    src, ref = surface_cloud(rng), surface_cloud(rng, 3000, 1.2)
    check_pair(src, ref, small_config())


def test_pyramid_equals_torch_uncapped_widths(rng):
    """Limits above every neighborhood (the torch path's neighbor sets are then whole)."""
    cfg = small_config(num_stages=3, neighbor_limits=(60, 60, 60))
    check_pair(surface_cloud(rng, 1500), surface_cloud(rng, 1000), cfg)


def test_build_cloud_pyramid_shapes_and_tiny_clouds(rng):
    cfg = small_config()
    kw = dict(num_stages=4, voxel_size=0.025, radius=0.0625, neighbor_limits=[20, 25, 30, 35])
    pyr = build_cloud_pyramid(grid_subsample(surface_cloud(rng), 0.025), **kw)
    for i in range(4):
        n_i = pyr.points[i].shape[0]
        assert pyr.neighbors[i].shape == (n_i, kw["neighbor_limits"][i])
        np.testing.assert_array_equal(pyr.neighbors[i][:, 0], np.arange(n_i))  # self first
    for cloud in (np.zeros((1, 3), np.float32), np.zeros((0, 3), np.float32)):
        tiny = voxelise_and_build(cloud, cfg)
        assert [p.shape[0] for p in tiny.points] == [len(cloud)] * 4
        assert [a.shape for a in tiny.upsampling] == [(len(cloud), k) for k in (25, 30, 35)]
    with pytest.raises(ValueError, match="neighbor_limits"):
        build_cloud_pyramid(pyr.points[0], **{**kw, "neighbor_limits": [20, 25]})


@pytest.mark.data
def test_pyramid_equals_torch_on_3dmatch(shared_data, shipped_configs):
    demo = shared_data / "geotransformer_repo" / "demo"
    if not (demo / "src.npy").is_file():
        pytest.skip(f"no 3DMatch demo pair in {demo}")
    src, ref = np.load(demo / "src.npy"), np.load(demo / "ref.npy")
    check_pair(src.astype(np.float32), ref.astype(np.float32), shipped_configs["indoor"])


def kitti_scan(shared_data: Path, frame: int) -> np.ndarray:
    path = shared_data / "kitti00_scancontext" / f"{frame:06d}.bin"
    if not path.is_file():
        pytest.skip(f"no KITTI scan {path}")
    return np.fromfile(path, dtype=np.float32).reshape(-1, 4)[:, :3].copy()


@pytest.mark.data
def test_pyramid_equals_torch_on_kitti(shared_data, shipped_configs):
    scan = kitti_scan(shared_data, 94)
    # the scan against a shifted half of itself: one KITTI cloud costs ~0.3 s both ways
    check_pair(scan, scan[::4] + np.float32(0.7), shipped_configs["outdoor"])


# ----------------------------------------------------------------------------- partition
def test_partition_equals_torch_on_a_small_cloud(rng):
    pyr = voxelise_and_build(surface_cloud(rng, 6000, 2.0), small_config())
    fine, nodes = pyr.points[1], pyr.points[-1]
    for limit in (8, 32, 2 * len(fine)):  # capped patches, and wider than the cloud
        check_partition(fine, nodes, limit)
    valid = rng.random(len(fine)) < 0.7
    check_partition(fine, nodes, 16, valid)
    check_partition(fine, nodes, 16, np.zeros(len(fine), bool))


def test_partition_ties_go_to_the_lower_index():
    """Integer coordinates (every distance exact in both paths): a point halfway between two
    nodes joins the lower-numbered one, as torch's argmin does."""
    g = np.arange(5, dtype=np.float32)
    points = np.stack(np.meshgrid(g, g, [0.0], indexing="ij"), -1).reshape(-1, 3)
    points = points.astype(np.float32)
    nodes = np.array([[4, 0, 0], [0, 0, 0], [2, 4, 0], [2, 2, 0]], dtype=np.float32)
    check_partition(points, nodes, 30)
    _, idx, _ = point_to_node_partition(points, nodes, 30)
    halfway = int(np.nonzero((points == [2, 0, 0]).all(1))[0][0])  # 2 from nodes 0, 1 and 3
    assert halfway in idx[0] and halfway not in idx[1] and halfway not in idx[3]


@pytest.mark.data
def test_partition_equals_torch_on_real_clouds(shared_data, shipped_configs):
    demo = shared_data / "geotransformer_repo" / "demo"
    if not (demo / "src.npy").is_file():
        pytest.skip(f"no 3DMatch demo pair in {demo}")
    clouds = {"indoor": np.load(demo / "src.npy"), "outdoor": kitti_scan(shared_data, 94)}
    for name, cloud in clouds.items():
        cfg = shipped_configs[name]
        pyr = voxelise_and_build(cloud, cfg)
        check_partition(pyr.points[1], pyr.points[-1], cfg.num_points_in_patch)


# ----------------------------------------------------------------------------- imports
def test_runtime_modules_import_neither_torch_nor_open3d():
    code = (
        "import sys, pcreg.runtime.pyramid, pcreg.runtime.partition; "
        "print(sorted(m for m in ('torch', 'open3d') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "[]"
