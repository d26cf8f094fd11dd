"""pcreg.register / RegistrationResult: inputs of every kind, model choice, errors, accuracy."""

from __future__ import annotations

import os

import numpy as np
import open3d as o3d
import pytest
import torch

import pcreg
from pcreg.api import MIN_POINTS, TooFewPointsError, as_points, register
from pcreg.errors import InputError, MissingFileError
from pcreg.io import write_points
from pcreg.registration.pipeline import choose_model, cloud_extent

pytestmark = pytest.mark.open3d


def test_fpfh_ransac_registers_the_room_pair_and_icp_refines_it(room_pair):
    src, ref, gt = room_pair
    res = register(src, ref, "indoor", method="fpfh-ransac", icp=False)
    err = res.errors(gt, src)
    # RANSAC on 5 cm FPFH is a coarse alignment (here ~6 deg / ~19 cm RMSE) ...
    assert err["rmse_m"] < 0.3 and err["rre_deg"] < 10 and err["rte_m"] < 0.3
    assert res.method == "fpfh-ransac" and res.setting == "indoor" and res.voxel_size == 0.05
    assert res.num_correspondences > 100 and err["inlier_ratio"] > 0.3
    refined = register(src, ref, "indoor", method="fpfh-ransac", icp=True)
    err_icp = refined.errors(gt, src)  # ... that ICP makes exact
    assert err_icp["rre_deg"] < 1.0 and err_icp["rte_m"] < 0.03  # noise is 3 mm
    assert err_icp["rmse_m"] <= err["rmse_m"]
    assert set(refined.timings) == {"load", "register", "icp", "verify", "total"}
    assert refined.registered and refined.confidence > 0.35 and refined.fitness > 0.3
    assert refined.time_s >= refined.timings["register"] + refined.timings["icp"]


def test_every_input_kind_gives_the_same_result(tmp_path, room_pair, tiny_checkpoint):
    src, ref, _ = room_pair
    write_points(tmp_path / "src.ply", src)
    write_points(tmp_path / "ref.npy", ref)

    def o3d_cloud(p):
        return o3d.geometry.PointCloud(o3d.utility.Vector3dVector(p.astype(np.float64)))

    inputs = [
        (src, ref),
        (torch.from_numpy(src), torch.from_numpy(ref)),
        (o3d_cloud(src), o3d_cloud(ref)),
        (tmp_path / "src.ply", str(tmp_path / "ref.npy")),
    ]
    results = [
        pcreg.register(s, r, model=tiny_checkpoint, method="geotransformer") for s, r in inputs
    ]
    for res in results[1:]:
        assert np.allclose(res.transform, results[0].transform, atol=1e-5)
    assert results[0].method == "geotransformer" and results[0].model == str(tiny_checkpoint)
    r = results[0]
    assert r.src_corr_points.shape == r.ref_corr_points.shape == (r.num_correspondences, 3)
    assert r.corr_scores.shape == (r.num_correspondences,)
    assert np.allclose(r.transform[3], [0, 0, 0, 1])
    assert np.allclose(r.transform[:3, :3] @ r.transform[:3, :3].T, np.eye(3), atol=1e-5)


def test_model_is_chosen_from_the_extent(room_pair):
    src, ref, _ = room_pair
    assert 3 < cloud_extent(ref) < 8
    assert choose_model(src, ref) == "indoor"
    assert choose_model(src * 10, ref * 10) == "outdoor"
    # stray far returns do not make a room "outdoor" (percentile extent)
    stray = np.vstack([ref, np.full((10, 3), 500.0, np.float32)])
    assert choose_model(src, stray) == "indoor"


def test_result_errors_are_the_textbook_quantities(room_pair):
    src, ref, gt = room_pair
    res = register(src, ref, "indoor", method="fpfh-ransac")
    res.transform = gt.copy()
    assert res.errors(gt, src) == pytest.approx(
        {
            "rre_deg": 0.0,
            "rte_m": 0.0,
            "rmse_m": 0.0,
            "centre_error_m": 0.0,
            "inlier_ratio": res.errors(gt)["inlier_ratio"],
        }
    )
    rot = np.eye(4)
    c, s = np.cos(np.radians(10)), np.sin(np.radians(10))
    rot[:2, :2] = [[c, -s], [s, c]]
    rot[:3, 3] = [0.3, 0.0, 0.4]
    res.transform = rot @ gt
    e = res.errors(gt)
    assert e["rre_deg"] == pytest.approx(10.0, abs=1e-9)
    # translation part of rot @ gt minus gt's: R_rot t_gt + t_rot - t_gt
    expect = np.linalg.norm(rot[:3, :3] @ gt[:3, 3] + rot[:3, 3] - gt[:3, 3])
    assert e["rte_m"] == pytest.approx(expect, rel=1e-9)
    # where the source lies: its centroid moved by the estimate and by the truth
    centre = src.mean(axis=0)
    at = np.linalg.norm((rot @ gt)[:3, :3] @ centre + (rot @ gt)[:3, 3] - gt[:3, :3] @ centre
                        - gt[:3, 3])  # fmt: skip
    assert res.errors(gt, src)["centre_error_m"] == pytest.approx(at, rel=1e-6)  # float32 src
    assert "centre_error_m" not in e  # only where the points are given
    d = res.to_dict()
    assert d["transform"] == res.transform.tolist() and d["num_correspondences"] > 0


def test_bad_inputs_raise_clear_errors(room_pair, tiny_checkpoint, tmp_path):
    src, ref, _ = room_pair
    with pytest.raises(InputError, match="scales differ by more than 10x"):
        register(src * 1000, ref, tiny_checkpoint)
    few = ref[:40]
    with pytest.raises(TooFewPointsError, match=rf"at least {MIN_POINTS} are needed"):
        register(src, few, tiny_checkpoint)
    with pytest.raises(InputError, match="unknown method 'icp-only'"):
        register(src, ref, "indoor", method="icp-only")
    with pytest.raises(InputError, match="unknown model; use one of indoor, outdoor"):
        register(src, ref, "indor")
    with pytest.raises(MissingFileError, match="model checkpoint not found"):
        register(src, ref, "no/such/model.pt")
    with pytest.raises(InputError, match="model: is empty; use one of indoor, outdoor"):
        register(src, ref, "")  # was named as the current directory, '.'
    with pytest.raises(MissingFileError, match="is a directory, not a model checkpoint file"):
        register(src, ref, str(tmp_path))  # was "not found"
    with pytest.raises(InputError, match="src: point cloud is empty"):
        register(np.zeros((0, 3)), ref, "indoor", method="fpfh-ransac")
    with pytest.raises(InputError, match="ref: no valid points: all 500 are invalid"):
        register(src, np.full((500, 3), np.nan), "indoor", method="fpfh-ransac")
    with pytest.raises(InputError, match="voxel_size: must be a positive"):
        register(src, ref, "indoor", method="fpfh-ransac", voxel_size=-1)


@pytest.mark.parametrize("kind", ["numpy", "torch", "open3d"])
def test_invalid_rows_of_arrays_are_dropped_counted_and_warned(room_pair, caplog, kind):
    """NaN/Inf rows of an in-memory cloud are dropped and counted in ``dropped_invalid``, as a
    file's are, with a warning each; a cloud that is mostly invalid says so."""
    import logging

    src, ref, gt = room_pair
    src, ref = src.astype(np.float64), ref.astype(np.float64)
    rows = np.random.default_rng(0).permutation(len(src))
    src[rows[:7], 1] = np.nan
    mostly = 10 * len(ref)  # the reference's valid points are 1 in 11: under 10 %
    ref = np.vstack([ref, np.full((mostly, 3), np.inf)])

    def kind_of(points):
        if kind == "torch":
            return torch.from_numpy(points)
        if kind == "open3d":
            return o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
        return points

    with caplog.at_level(logging.WARNING, logger="pcreg"):
        res = register(kind_of(src), kind_of(ref), "indoor", method="fpfh-ransac")
    assert res.dropped_invalid == (7, mostly)
    assert res.to_dict()["dropped_invalid"] == [7, mostly]
    assert f"src: dropped 7 of {len(src)} points as invalid (7 with NaN/Inf" in caplog.text
    assert f"ref: most of the cloud is invalid: only {len(ref) - mostly} of {len(ref)}" in (
        caplog.text
    )
    assert res.registered and res.errors(gt, src[np.isfinite(src).all(axis=1)])["rre_deg"] < 5


def test_a_kitti_scan_array_gives_its_first_three_columns(room_pair, caplog):
    """A KITTI scan as an ``(N, 4)`` array (x, y, z, intensity): the coordinates are its first
    3 columns and the intensity is ignored, with a note at INFO."""
    import logging

    src = room_pair[0].astype(np.float64)
    scan = np.hstack([src, np.linspace(0, 1, len(src))[:, None]]).astype(np.float32)
    for cloud in (scan, torch.from_numpy(scan)):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="pcreg.io"):
            pts = as_points(cloud, "scan")
        np.testing.assert_array_equal(pts, scan[:, :3].astype(np.float64))
        assert caplog.messages == [
            "scan: 4 columns; x, y, z are the first 3, the other 1 are ignored"
        ]
    with pytest.raises(InputError, match=r"scan: expected an \(N, 3\) array of points, got shape"):
        as_points(scan[:, :2], "scan")


def test_method_used_is_the_method_of_a_single_method_pipeline(room_pair, tiny_checkpoint):
    """``method_used`` was ``''`` outside ``method="auto"`` (while ``to_dict`` said the
    method): results of ``load_model(...)(src, ref)`` and of the Ray runner's workers."""
    import pickle

    src, ref, _ = room_pair
    res = pcreg.load_model(tiny_checkpoint)(src, ref)
    assert res.method == res.method_used == res.to_dict()["method_used"] == "geotransformer"
    assert pickle.loads(pickle.dumps(res)).method_used == "geotransformer"  # as Ray returns it
    classical = pcreg.api.pipeline("indoor", method="fpfh-ransac")(src, ref)
    assert classical.method_used == "fpfh-ransac"


def test_voxel_count_counts_occupied_cells(gen):
    from pcreg.registration.pipeline import _voxel_count

    rng = np.random.default_rng(0)
    pts = rng.uniform(0, 10, (5000, 3))
    keys = np.floor((pts - pts.min(0)) / 0.7).astype(np.int64)
    assert _voxel_count(pts, 0.7) == len({tuple(k) for k in keys.tolist()})
    # a span too large for one int64 key per cell takes the row-wise path: same answer
    far = np.array([[0.0, 0.0, 0.0], [1e7, 1e7, 1e7], [1e7, 1e7, 1e7 + 1e-4], [5.0, 5.0, 5.0]])
    assert _voxel_count(far, 1e-3) == 3


def test_networks_are_cached_by_the_checkpoint_file_not_its_name(
    tmp_path, tiny_checkpoint, monkeypatch
):
    """One name, two files: ``tiny.pt`` in two directories, and one file rewritten in place,
    are three networks (a long-lived process, e.g. ``pcreg serve``, must not answer with the
    first one it loaded)."""
    import shutil

    from pcreg import api

    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        shutil.copy(tiny_checkpoint, tmp_path / d / "tiny.pt")
    monkeypatch.chdir(tmp_path / "a")
    first = api._network("tiny.pt", "cpu")
    assert api._network("tiny.pt", "cpu") is first  # cached
    monkeypatch.chdir(tmp_path / "b")
    other = api._network("tiny.pt", "cpu")
    assert other is not first
    st = (tmp_path / "b" / "tiny.pt").stat()
    os.utime(tmp_path / "b" / "tiny.pt", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert api._network("tiny.pt", "cpu") is not other  # rewritten: loaded anew
    assert api._network("indoor", "cpu") is api._network("indoor", "cpu")


def test_tensors_on_the_meta_device_or_in_bfloat16_are_handled(rng):
    """A meta tensor has no values: one clean error; bfloat16 (no numpy twin) is widened."""
    import torch

    from pcreg.api import as_points
    from pcreg.errors import InputError

    with pytest.raises(InputError, match="'meta' device"):
        as_points(torch.empty(500, 3, device="meta"), "src")
    pts = rng.uniform(-2, 2, (500, 3))
    got = as_points(torch.tensor(pts, dtype=torch.bfloat16), "src")
    assert got.dtype == np.float64 and got.shape == (500, 3)
    assert np.allclose(got, pts, atol=0.02)  # bfloat16 keeps ~3 significant digits


def test_max_memory_caps_the_reading_of_files(tmp_path, rng):
    """``register(path, path, max_memory=...)`` reads the files under that cap too."""
    for name in ("a", "b"):
        np.save(tmp_path / f"{name}.npy", rng.uniform(0, 3, (2000, 3)))
    with pytest.raises(InputError, match=r"a.npy: too large to read under the memory cap"):
        pcreg.register(tmp_path / "a.npy", tmp_path / "b.npy", max_memory="20K")


def test_the_result_checks_take_what_register_takes(tmp_path, room_pair):
    """``against``, ``errors`` and ``uncertainty`` read paths, tensors and Open3D clouds as
    ``register`` does (a newcomer passed the same paths and got numpy's "could not convert
    string to float"), and refuse bad clouds with an InputError naming them."""
    src, ref, gt = room_pair
    write_points(tmp_path / "src.ply", src)
    write_points(tmp_path / "ref.ply", ref)
    paths = (str(tmp_path / "src.ply"), str(tmp_path / "ref.ply"))
    res = register(*paths, "indoor", method="fpfh-ransac")
    assert res.against(gt, *paths) == res.against(gt, src, ref)
    assert res.errors(gt, paths[0]) == res.errors(gt, src)
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(ref))
    assert (
        res.against(gt, torch.from_numpy(src), cloud)["right"] == res.against(gt, src, ref)["right"]
    )
    u_paths, u_arrays = res.uncertainty(*paths), res.uncertainty(src, ref)
    assert np.allclose(u_paths["covariance"], u_arrays["covariance"])
    with pytest.raises(InputError, match="src_points"):
        res.against(gt, src[:, :2], ref)
    with pytest.raises(MissingFileError):
        res.errors(gt, str(tmp_path / "nothing.ply"))
