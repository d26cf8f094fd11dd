"""KITTI: real metadata counts, poses/calibration against the shared ground truth, the pair
selection rule, and ground truth that aligns real scans."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.spatial import cKDTree

from pcreg.data.kitti import KittiPairs, read_kitti_metadata, refine_with_icp, select_pairs
from pcreg.errors import MissingFileError


def test_select_pairs_rule():
    pos = np.stack([np.arange(40.0), np.zeros(40), np.zeros(40)], 1)  # 1 m per frame
    assert select_pairs(pos, 10.0) == [(0, 10), (11, 21), (22, 32)]
    stop = np.zeros((5, 3))
    assert select_pairs(stop, 10.0) == []


@pytest.mark.data
def test_real_metadata_counts_and_convention(shared_data):
    meta = shared_data / "geotransformer_repo" / "Kitti" / "metadata"
    counts = {s: len(read_kitti_metadata(meta / f"{s}.pkl")) for s in ("train", "val", "test")}
    assert counts == {"train": 1358, "val": 180, "test": 555}
    test = read_kitti_metadata(meta / "test.pkl")
    assert {r.seq for r in test} == {8, 9, 10}
    dists = np.array([np.linalg.norm(r.transform[:3, 3]) for r in test])
    assert 9.0 < np.median(dists) < 12.0  # pairs about 10 m apart


def _rmse_on_overlap(src, ref, t, radius=0.2):
    src = src[src[:, 2] > -1.3]  # above the ground (sensor 1.73 m up): the ground plane
    # slides into itself under most errors and would hide them
    moved = src @ t[:3, :3].T + t[:3, 3]
    d, _ = cKDTree(ref).query(moved, k=1, distance_upper_bound=radius)
    close = d[np.isfinite(d)]
    return float(np.sqrt(np.mean(close**2))), close.size / len(src)


@pytest.mark.data
def test_pairs_from_poses_match_published_transforms_and_align(tmp_path):
    from tests.conftest import SHARED_DATA

    root = SHARED_DATA.parent / "train_data" / "kitti_seq00-07_semantickitti_mini"
    if not root.is_dir():
        pytest.skip("train_data not present")
    published = {
        (p["seq"], p["ref_frame"], p["src_frame"]): np.asarray(p["T_ref_src"])
        for p in json.loads((root / "pairs.json").read_text())["pairs"]
    }
    ds = KittiPairs(root, "train", sequences=(0, 4), refine=False, min_distance=5.0)
    assert len(ds) == 2
    for i in range(len(ds)):
        src, ref, t, r = ds[i]
        key = (f"{r.seq:02d}", r.ref_frame, r.src_frame)
        assert np.allclose(t, published[key], atol=1e-6)
        rmse, frac = _rmse_on_overlap(src, ref, t)
        # LiDAR points are centimetres to decimetres apart, so the nearest-neighbor RMSE is set
        # by the sampling; the ground truth must be as good as the best ICP fit from it
        best, _ = _rmse_on_overlap(src, ref, refine_with_icp(src, ref, t))
        assert rmse < best + 0.01 and frac > 0.3
        yaw = np.deg2rad(5.0)
        rot = np.eye(4)
        rot[:2, :2] = [[np.cos(yaw), -np.sin(yaw)], [np.sin(yaw), np.cos(yaw)]]
        assert _rmse_on_overlap(src, ref, t @ rot)[1] < 0.6 * frac


@pytest.mark.data
def test_icp_refinement_stays_close_on_real_scans(shared_data, tmp_path):
    from pcreg.io import read_points

    d = shared_data / "kitti00_scancontext"
    pair = json.loads((d / "pairs.json").read_text())["pairs"][0]
    ref, src = read_points(d / pair["ref_file"]), read_points(d / pair["src_file"])
    t = np.asarray(pair["T_ref_from_src"])
    refined = refine_with_icp(src, ref, t)
    assert np.linalg.norm(refined[:3, 3] - t[:3, 3]) < 0.05  # KITTI poses: ~2 cm
    assert _rmse_on_overlap(src, ref, refined)[0] <= _rmse_on_overlap(src, ref, t)[0] + 1e-3


def test_missing_poses_is_a_clear_error(tmp_path):
    velo = tmp_path / "sequences" / "08" / "velodyne"
    velo.mkdir(parents=True)
    np.zeros((10, 4), np.float32).tofile(velo / "000000.bin")
    with pytest.raises(MissingFileError, match="poses file not found"):
        KittiPairs(tmp_path, "test", sequences=(8,))
