"""``pcreg odometry`` over a real KITTI sequence, in parallel on Ray, scored by ``evo_ape kitti``
against the sequence's own poses moved into the Velodyne frame (the frame pcreg writes)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pcreg.cli import main
from pcreg.data.kitti import read_calib_tr, read_poses, velodyne_poses
from pcreg.odometry import write_kitti_poses

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


def test_odometry_of_a_kitti_sequence_is_what_evo_reads(shared_data, tmp_path):
    seq = shared_data.parent / "train_data" / MINI / "sequences" / "05"
    if not seq.is_dir():
        pytest.skip(f"{seq} is absent")
    est = tmp_path / "05.txt"
    # a directory of scans, registered in parallel (Ray, 2 CPUs), chained in order
    assert main(["odometry", str(seq / "velodyne"), "--out", str(est), "--workers", "2"]) == 0
    frames = sorted(int(p.stem) for p in (seq / "velodyne").glob("*.bin"))
    ref = write_kitti_poses(tmp_path / "05_ref.txt", velodyne_reference(seq, frames))
    rmse = evo_ape_rmse(ref, est)
    truth = velodyne_reference(seq, frames)
    ours = read_poses(est)
    assert ours.shape == truth.shape == (len(frames), 4, 4)
    direct = np.sqrt(np.mean(np.sum((ours[:, :3, 3] - truth[:, :3, 3]) ** 2, axis=1)))
    assert rmse == pytest.approx(direct, abs=1e-4)  # evo reads the files as we wrote them
    assert rmse < 0.3  # three KITTI hops of ~3 m each
