"""``pcreg odometry`` over a real KITTI sequence, in parallel on Ray, scored by ``evo_ape kitti``
against the sequence's own poses moved into the Velodyne frame (the frame pcreg writes by
default), and with ``--frame camera`` against KITTI's official (cam0) poses as they are."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from pcreg.cli import main
from pcreg.data.kitti import camera_poses, read_calib_tr, read_poses, velodyne_poses
from pcreg.odometry import sidecar_path, write_kitti_poses
from tests.conftest import SHARED_DATA

pytestmark = [pytest.mark.data, pytest.mark.ray]

MINI = "kitti_seq00-07_semantickitti_mini"


def velodyne_reference(seq: Path, frames: list[int]) -> np.ndarray:
    """The sequence's poses (cam0, SemanticKITTI) of ``frames`` as Velodyne poses relative to
    the first of them: ``inv(V_first) V_k`` with ``V = inv(Tr) P Tr``."""
    velo = velodyne_poses(read_poses(seq / "poses.txt"), read_calib_tr(seq / "calib.txt"))
    first = np.linalg.inv(velo[frames[0]])
    return np.stack([first @ velo[f] for f in frames])


def evo_ape_rmse(ref: Path, est: Path) -> float:
    """``evo_ape kitti REF EST`` (translation part, no alignment), its RMSE in metres."""
    out = subprocess.run(
        [str(Path(sys.executable).with_name("evo_ape")), "kitti", str(ref), str(est)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return float(re.search(r"rmse\s+([0-9.eE+-]+)", out.stdout).group(1))


def evo_ape_rmse_exact(ref: Path, est: Path, results: Path, relation: str = "trans_part") -> float:
    """``evo_ape kitti REF EST -r RELATION`` as :func:`evo_ape_rmse`, its RMSE at full
    precision (from the statistics ``--save_results`` stores; the printed table has 6
    decimals). ``angle_deg``: the rotation part, in degrees."""
    subprocess.run(
        [str(Path(sys.executable).with_name("evo_ape")), "kitti", str(ref), str(est),
         "-r", relation, "--save_results", str(results), "--no_warnings"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    with zipfile.ZipFile(results) as archive:
        return float(json.loads(archive.read("stats.json"))["rmse"])


def translation_rmse(a: np.ndarray, b: np.ndarray) -> float:
    """Translation RMSE of two ``(K, 4, 4)`` trajectories (evo's APE, translation part)."""
    return float(np.sqrt(np.mean(np.sum((a[:, :3, 3] - b[:, :3, 3]) ** 2, axis=1))))


@pytest.fixture(scope="module")
def sequence() -> Path:
    seq = SHARED_DATA.parent / "train_data" / MINI / "sequences" / "05"
    if not seq.is_dir():
        pytest.skip(f"{seq} is absent")
    return seq


@pytest.fixture(scope="module")
def lidar_run(sequence, tmp_path_factory) -> Path:
    """``pcreg odometry`` of the sequence in the LiDAR frame (default), its poses file."""
    est = tmp_path_factory.mktemp("lidar") / "05.txt"
    # a directory of scans, registered in parallel (Ray, 2 CPUs), chained in order
    argv = ["odometry", str(sequence / "velodyne"), "--out", str(est), "--workers", "2"]
    assert main(argv) == 0
    return est


def test_odometry_of_a_kitti_sequence_is_what_evo_reads(sequence, lidar_run, tmp_path):
    seq, est = sequence, lidar_run
    frames = sorted(int(p.stem) for p in (seq / "velodyne").glob("*.bin"))
    ref = write_kitti_poses(tmp_path / "05_ref.txt", velodyne_reference(seq, frames))
    rmse = evo_ape_rmse(ref, est)
    truth = velodyne_reference(seq, frames)
    ours = read_poses(est)
    assert ours.shape == truth.shape == (len(frames), 4, 4)
    direct = np.sqrt(np.mean(np.sum((ours[:, :3, 3] - truth[:, :3, 3]) ** 2, axis=1)))
    assert rmse == pytest.approx(direct, abs=1e-4)  # evo reads the files as we wrote them
    assert rmse < 0.3  # three KITTI hops of ~3 m each


def test_camera_frame_odometry_is_scored_against_kittis_own_poses(sequence, lidar_run, tmp_path):
    """``--frame camera`` poses against KITTI's official poses.txt (frames made relative to
    the first), and how that score relates to the LiDAR frame's.

    Translation APE is not frame-invariant. With ``Tr = [R_c | t_c]`` (Velodyne -> cam0) and
    ``c = inv(Tr)[:3, 3]`` the camera's origin in the Velodyne frame (~(0.33, -0.005, -0.08) m
    for sequence 05), ``P = Tr V inv(Tr)`` gives the camera-frame position error of scan k as
    ``R_c (dt_k + dR_k c)``, with ``dt_k``, ``dR_k`` the LiDAR-frame translation and rotation
    differences (estimate - truth). So the camera frame scores the error of the point ``c``
    carried by the LiDAR poses, not that of the LiDAR's origin: rotation errors lever it by
    ``|dR_k c|`` (<= angle x 0.34 m), and the two RMSEs differ by at most RMS_k |dR_k c|
    (Minkowski). On frames 0, 3, 6, 9 of sequence 05: 0.025055 m (camera) against 0.024905 m
    (LiDAR), 0.15 mm apart. Each is checked against its own numpy computation."""
    seq = sequence
    frames = sorted(int(p.stem) for p in (seq / "velodyne").glob("*.bin"))
    calib = seq / "calib.txt"
    est = tmp_path / "05_cam.txt"
    # in this process (--workers 1): the Ray path is the LiDAR run's, and the same
    # registrations give the same poses there and here (checked below to 1e-6)
    argv = ["odometry", str(seq / "velodyne"), "--frame", "camera", "--calib", str(calib),
            "--out", str(est), "--workers", "1"]  # fmt: skip
    assert main(argv) == 0
    record = json.loads(sidecar_path(est).read_text())
    assert (record["frame"], record["calib"]) == ("camera", str(calib))
    official = read_poses(seq / "poses.txt")
    truth_cam = np.stack([np.linalg.inv(official[frames[0]]) @ official[f] for f in frames])
    ref_cam = write_kitti_poses(tmp_path / "05_ref_cam.txt", truth_cam)
    ref_lidar = write_kitti_poses(tmp_path / "05_ref.txt", velodyne_reference(seq, frames))
    cam_rmse = evo_ape_rmse_exact(ref_cam, est, tmp_path / "cam.zip")
    lidar_rmse = evo_ape_rmse_exact(ref_lidar, lidar_run, tmp_path / "lidar.zip")

    ours_cam, ours_lidar = read_poses(est), read_poses(lidar_run)
    truth_lidar = read_poses(ref_lidar)
    tr = read_calib_tr(calib)
    # the camera poses are the LiDAR run's, converted (two runs of the same registrations)
    assert np.allclose(ours_cam, camera_poses(ours_lidar, tr), atol=1e-6)
    # each score is what numpy computes from the files evo read
    assert cam_rmse == pytest.approx(translation_rmse(ours_cam, truth_cam), rel=1e-6)
    assert lidar_rmse == pytest.approx(translation_rmse(ours_lidar, truth_lidar), rel=1e-6)
    # the camera score is the LiDAR poses' error at the camera's origin c, in the LiDAR frame
    c = np.linalg.inv(tr)[:, 3]
    at_c = np.linalg.norm((ours_lidar - truth_lidar) @ c, axis=1)
    assert cam_rmse == pytest.approx(float(np.sqrt(np.mean(at_c**2))), rel=1e-6)
    # so it differs from the LiDAR score by no more than the rotation errors' lever on c
    lever = (ours_lidar[:, :3, :3] - truth_lidar[:, :3, :3]) @ c[:3]
    bound = float(np.sqrt(np.mean(np.sum(lever**2, axis=1))))
    assert abs(cam_rmse - lidar_rmse) <= bound + 1e-9
    assert cam_rmse < 0.3  # three KITTI hops of ~3 m each, as in the LiDAR frame
    # evo's rotation APE does not depend on the frame: each pose error E = inv(P_ref) P_est
    # becomes Tr E inv(Tr), the same rotation angle, so both frames report the same error
    cam_deg = evo_ape_rmse_exact(ref_cam, est, tmp_path / "cam_deg.zip", "angle_deg")
    lidar_deg = evo_ape_rmse_exact(ref_lidar, lidar_run, tmp_path / "lidar_deg.zip", "angle_deg")
    assert 0 < cam_deg < 1 and cam_deg == pytest.approx(lidar_deg, abs=1e-3)
