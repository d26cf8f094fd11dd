"""`pcreg odometry`: chaining, the KITTI poses file, the trajectory picture, real KITTI scans."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pcreg.cli import main
from pcreg.data.kitti import read_poses
from pcreg.geometry import random_transform, relative_rotation_error_deg
from pcreg.io import write_points
from pcreg.odometry import run_odometry

pytestmark = pytest.mark.open3d


def _rre_rte(est: np.ndarray, gt: np.ndarray) -> tuple[float, float]:
    rre = float(relative_rotation_error_deg(torch.from_numpy(est), torch.from_numpy(gt)))
    return rre, float(np.linalg.norm(est[:3, 3] - gt[:3, 3]))


def test_chained_poses_match_the_true_trajectory(tmp_path, room_pair):
    _, scene, _ = room_pair
    scene = scene[::4]  # 4k points: RANSAC's validations cost in proportion
    g = torch.Generator().manual_seed(3)
    # sensor poses P_k (scan k -> scan 0); FPFH is rotation invariant, so any rotation
    poses = [np.eye(4)]
    for _ in range(2):
        step = random_transform(g, max_translation=0.3, dtype=torch.float64)
        poses.append(poses[-1] @ step.numpy())
    paths = []
    rng = np.random.default_rng(0)
    for k, pose in enumerate(poses):
        inv = np.linalg.inv(pose)  # scene (scan-0 frame) -> scan k frame
        pts = scene @ inv[:3, :3].T + inv[:3, 3] + rng.normal(0, 0.002, scene.shape)
        paths.append(tmp_path / f"{k:06d}.npy")
        write_points(paths[-1], pts.astype(np.float32))
    res = run_odometry(
        paths, model="indoor", method="fpfh-ransac", icp=True, progress=False, workers=1
    )
    assert res.poses.shape == (3, 4, 4) and res.relative.shape == (2, 4, 4)
    assert np.allclose(res.poses[0], np.eye(4))
    for est, gt in zip(res.poses, poses, strict=True):
        rre, rte = _rre_rte(est, gt)
        assert rre < 0.3 and rte < 0.02
    # the CLI writes the same poses in KITTI format, and a picture
    out, png = tmp_path / "poses.txt", tmp_path / "traj.png"
    argv = ["odometry", *map(str, paths), "--model", "indoor", "--method", "fpfh-ransac",
            "--icp", "--out", str(out), "--render", str(png), "--workers", "1"]  # fmt: skip
    assert main(argv) == 0
    written = read_poses(out)
    assert np.allclose(written, res.poses, atol=1e-6)
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert main(argv) == 2  # outputs exist: refused without --force


@pytest.mark.parametrize("target", ["first", "second", "in the folder", "in a file's address"])
def test_odometry_never_writes_over_an_input_even_with_force(tmp_path, capsys, room_pair, target):
    """``--out`` naming one of the scans (given as files, as their folder, or as an address
    inside a file: the file itself) is refused before any work, with ``--force``; the scan
    is unchanged and no sidecar is written beside it (it was overwritten with the poses
    file before)."""
    scans = [tmp_path / "000000.npy", tmp_path / "000001.npy"]
    for path, cloud in zip(scans, room_pair[:2], strict=True):
        write_points(path, cloud[::8].astype(np.float32))
    given = [str(p) for p in scans]
    out = scans[1] if target == "second" else scans[0]
    if target == "in the folder":
        given = [str(tmp_path)]
    elif target == "in a file's address":  # a scan read from an address: "FILE#SELECTOR"
        out = tmp_path / "site.npy"
        out.write_bytes(scans[0].read_bytes())
        given = [f"{out}#0", str(scans[1])]
    before = out.read_bytes()
    argv = ["odometry", *given, "--method", "fpfh-ransac", "--workers", "1", "--force"]
    assert main([*argv, "--out", str(out)]) == 2
    assert "is an input of this command" in capsys.readouterr().err
    assert out.read_bytes() == before and not out.with_name(out.name + ".json").exists()


def test_odometry_needs_two_scans(tmp_path, capsys, room_pair):
    write_points(tmp_path / "a.npy", room_pair[0])
    assert main(["odometry", str(tmp_path / "a.npy")]) == 2
    assert "at least two scans" in capsys.readouterr().err


@pytest.mark.data
@pytest.mark.parametrize("method", ["fpfh-ransac", "geotransformer"])  # the shipped outdoor model
@pytest.mark.parametrize("frames", [(94, 95), (198, 199)])
def test_real_kitti_relative_poses_within_5cm_half_degree(shared_data, capsys, frames, method):
    folder = shared_data / "kitti00_scancontext"
    meta = json.loads((folder / "pairs.json").read_text())
    tr = np.asarray(meta["Tr_velo_to_cam0"])
    cam = read_poses(folder / "KITTI_00_gt_poses.txt")
    a, b = frames
    gt = np.linalg.inv(tr) @ np.linalg.inv(cam[a]) @ cam[b] @ tr  # scan b -> scan a (Velodyne)
    scans = [str(folder / f"{f:06d}.bin") for f in frames]
    argv = ["odometry", *scans, "--method", method, "--icp", "--json"]
    assert main(argv) == 0
    record = json.loads(capsys.readouterr().out)
    rre, rte = _rre_rte(np.asarray(record["relative"][0]), gt)
    assert rre < 0.5 and rte < 0.05, (rre, rte)
    assert record["model"] == "outdoor"


@pytest.fixture
def three_scans(tmp_path, rng):
    """Three random 30 m clouds as .npy files (only the argument checks get to see them)."""
    scans = []
    for k in range(3):
        path = tmp_path / f"{k}.npy"
        np.save(path, rng.uniform(0, 30, (3000, 3)))
        scans.append(path)
    return scans


def test_odometry_refuses_zero_workers(three_scans):
    from pcreg.errors import InputError

    with pytest.raises(InputError, match="workers: must be at least 1"):
        run_odometry(three_scans, workers=0)


def test_odometry_refuses_an_address_nothing_answers_at(three_scans):
    from pcreg.errors import InputError

    with pytest.raises(InputError, match=r"no Ray cluster answers at 127\.0\.0\.1:1"):
        run_odometry(three_scans, address="127.0.0.1:1")
