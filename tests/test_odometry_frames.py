"""Odometry poses in the LiDAR or the camera frame: the conversion, the calibration it reads,
and what ``pcreg odometry --frame`` writes (poses, sidecar JSON, --json). No data, no Ray: the
CLI tests replace the registrations by known motions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pcreg.cli import main
from pcreg.data.kitti import camera_poses, read_calib_tr, read_poses, velodyne_poses
from pcreg.errors import CorruptFileError, MissingFileError, NonRigidTransformError
from pcreg.odometry import CONVENTION, OdometryResult, find_calib, sidecar_path

# KITTI sequences 04-12's Tr: (Velodyne -> cam0), as in their calib.txt
TR_LINE = (
    "Tr: -1.857739385241e-03 -9.999659513510e-01 -8.039975204516e-03 -4.784029760483e-03 "
    "-6.481465826011e-03 8.051860151134e-03 -9.999466081774e-01 -7.337429464231e-02 "
    "9.999773098287e-01 -1.805528627661e-03 -6.496203536139e-03 -3.339968064433e-01"
)
TR = np.vstack([np.asarray(TR_LINE.split()[1:], float).reshape(3, 4), [0, 0, 0, 1]])


def _rigid(rng: np.random.Generator, n: int) -> np.ndarray:
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    w, x, y, z = q.T
    out = np.tile(np.eye(4), (n, 1, 1))
    out[:, :3, :3] = np.stack(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    ).transpose(2, 0, 1)
    out[:, :3, 3] = rng.uniform(-20, 20, (n, 3))
    return out


def test_camera_poses_round_trip_with_velodyne_poses(rng):
    velo = _rigid(rng, 7)
    cam = camera_poses(velo, TR)
    assert cam.shape == (7, 4, 4) and cam.dtype == np.float64
    assert np.allclose(velodyne_poses(cam, TR), velo, atol=1e-9)
    assert np.allclose(camera_poses(velodyne_poses(cam, TR), TR), cam, atol=1e-9)
    # poses relative to the first frame convert to the camera's relative to its first frame
    first = np.linalg.inv(velo[0]) @ velo
    assert np.allclose(camera_poses(first, TR), np.linalg.inv(cam[0]) @ cam, atol=1e-9)
    # and a point moves the same way in either frame: Tr V x_velo = P Tr x_velo
    x = np.array([3.0, -1.0, 0.5, 1.0])
    assert np.allclose(TR @ velo[3] @ x, cam[3] @ TR @ x, atol=1e-9)


def test_camera_poses_of_known_motions_by_hand():
    """KITTI-like mounting, by hand: cam0 x = -velo y (right), y = -velo z (down), z = velo x
    (forward); the camera's origin sits at ``c = (0.27, 0, -0.08)`` in the Velodyne frame
    (``Tr`` translation ``-R c = (0, -0.08, -0.27)``)."""
    tr = np.eye(4)
    tr[:3, :3] = [[0, -1, 0], [0, 0, -1], [1, 0, 0]]
    tr[:3, 3] = [0.0, -0.08, -0.27]
    # 2 m forward, no turn: the camera moves 2 m along its own z
    ahead = np.eye(4)
    ahead[0, 3] = 2.0
    want = np.eye(4)
    want[2, 3] = 2.0
    assert np.allclose(camera_poses(ahead, tr), want, atol=1e-12)
    # a 90 degree left turn about the Velodyne's z (up) axis, in place: the camera, 0.27 m
    # ahead of the Velodyne, swings to (0, 0.27, -0.08) in Velodyne frame 0, i.e. moves by
    # (-0.27, +0.27, 0) there = (-0.27, 0, -0.27) in cam0 axes (to the left and back); its
    # forward axis now points to cam0's -x, its right axis to cam0's +z, y (down) unchanged
    left = np.eye(4)
    left[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]
    want = np.eye(4)
    want[:3, :3] = [[0, 0, -1], [0, 1, 0], [1, 0, 0]]
    want[:3, 3] = [-0.27, 0.0, -0.27]
    assert np.allclose(camera_poses(left, tr), want, atol=1e-12)
    # a stack converts pose by pose
    assert np.allclose(camera_poses(np.stack([ahead, left]), tr)[1], want, atol=1e-12)


def test_odometry_result_in_camera_frame_converts_poses_and_relative_motions(rng):
    relative = _rigid(rng, 3)
    poses = [np.eye(4)]
    for t in relative:
        poses.append(poses[-1] @ t)
    lidar = OdometryResult(np.stack(poses), relative, np.ones(3), "outdoor")
    cam = lidar.in_camera_frame(TR)
    assert (lidar.frame, cam.frame) == ("lidar", "camera")
    assert np.allclose(cam.poses, camera_poses(lidar.poses, TR))
    assert np.allclose(cam.poses[0], np.eye(4), atol=1e-12)
    chained = [np.eye(4)]
    for t in cam.relative:  # the camera's own motions chain into its poses
        chained.append(chained[-1] @ t)
    assert np.allclose(np.stack(chained), cam.poses, atol=1e-9)
    assert cam.model == "outdoor" and np.array_equal(cam.times, lidar.times)
    with pytest.raises(ValueError, match="camera frame"):
        cam.in_camera_frame(TR)


def test_read_calib_tr_reads_kitti_and_names_a_bad_file(tmp_path):
    good = tmp_path / "calib.txt"
    good.write_text("P0: 1 0 0 0 0 1 0 0 0 0 1 0\n" + TR_LINE + "\n")
    assert np.allclose(read_calib_tr(good), TR)
    cases = {
        "short.txt": ("Tr: 1 0 0 0 0 1 0 0 0 0 1\n", CorruptFileError, "12 numbers, got 11"),
        "words.txt": ("Tr: 1 0 0 zero 0 1 0 0 0 0 1 0\n", CorruptFileError, "cannot parse"),
        "none.txt": ("P0: 1 0 0 0 0 1 0 0 0 0 1 0\n", CorruptFileError, "no 'Tr:' line"),
        "scaled.txt": ("Tr: 2 0 0 0 0 2 0 0 0 0 2 0\n", NonRigidTransformError, "orthonormal"),
        "nan.txt": ("Tr: nan 0 0 0 0 1 0 0 0 0 1 0\n", ValueError, "NaN"),
    }
    for name, (text, kind, problem) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(kind, match=problem) as err:
            read_calib_tr(tmp_path / name)
        assert str(err.value).startswith(str(tmp_path / name))
    (tmp_path / "binary.txt").write_bytes(b"\xff\xfe\x00Tr:")
    with pytest.raises(CorruptFileError, match="not a text"):
        read_calib_tr(tmp_path / "binary.txt")
    with pytest.raises(MissingFileError):
        read_calib_tr(tmp_path / "absent.txt")


@pytest.fixture
def sequence(tmp_path, monkeypatch):
    """``seq/velodyne/{0,1,2}.npy`` beside ``seq/calib.txt``, and ``run_odometry`` replaced
    by a known trajectory (LiDAR frame): 1 m forward, then a turn."""
    velo = tmp_path / "seq" / "velodyne"
    velo.mkdir(parents=True)
    for k in range(3):
        np.save(velo / f"{k}.npy", np.zeros((10, 3)))
    (tmp_path / "seq" / "calib.txt").write_text(TR_LINE + "\n")
    relative = _rigid(np.random.default_rng(5), 2)
    poses = np.stack([np.eye(4), relative[0], relative[0] @ relative[1]])
    calls = []

    def fake(scans, **kwargs):
        calls.append(scans)
        return OdometryResult(poses, relative, np.array([0.1, 0.2]), "outdoor")

    monkeypatch.setattr("pcreg.odometry.run_odometry", fake)
    return tmp_path / "seq", poses, relative, calls


def _lines(out: str) -> list[list[float]]:
    return [[float(v) for v in line.split()] for line in out.splitlines()]


def test_cli_writes_camera_poses_and_a_sidecar_saying_so(sequence, tmp_path, capsys):
    seq, poses, relative, _ = sequence
    calib = seq / "calib.txt"
    out = tmp_path / "05.txt"
    argv = ["odometry", str(seq / "velodyne"), "--frame", "camera", "--calib", str(calib)]
    assert main([*argv, "--out", str(out)]) == 0
    assert np.allclose(read_poses(out), camera_poses(poses, TR), atol=1e-8)
    assert all(len(row) == 12 for row in _lines(out.read_text()))  # evo reads it as KITTI
    side = json.loads(sidecar_path(out).read_text())
    scans = [str(seq / "velodyne" / f"{k}.npy") for k in range(3)]
    assert sidecar_path(out) == tmp_path / "05.txt.json"
    assert side == {"frame": "camera", "calib": str(calib), "convention": CONVENTION,
                    "scans": scans, "segments": [0, 0, 0], "breaks": []}  # fmt: skip
    # the printed poses (no --out) are the same camera poses, 12 numbers a line
    capsys.readouterr()
    assert main(argv) == 0
    printed = np.asarray(_lines(capsys.readouterr().out))
    assert printed.shape == (3, 12)
    assert np.allclose(printed, camera_poses(poses, TR)[:, :3, :4].reshape(3, 12), atol=1e-5)
    # --json says the frame, and its poses and relative motions are the camera's
    assert main([*argv, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert (record["frame"], record["calib"], record["convention"]) == (
        "camera", str(calib), CONVENTION
    )  # fmt: skip
    assert np.allclose(record["poses"], camera_poses(poses, TR))
    assert np.allclose(record["relative"], camera_poses(relative, TR))


def test_cli_lidar_frame_is_the_default_and_recorded(sequence, tmp_path, capsys):
    seq, poses, relative, _ = sequence
    out = tmp_path / "poses.txt"
    assert main(["odometry", str(seq / "velodyne"), "--out", str(out), "--json"]) == 0
    assert np.allclose(read_poses(out), poses, atol=1e-8)
    side = json.loads((tmp_path / "poses.txt.json").read_text())
    assert (side["frame"], side["calib"]) == ("lidar", None)
    record = json.loads(capsys.readouterr().out)
    assert (record["frame"], record["calib"]) == ("lidar", None)
    assert np.allclose(record["relative"], relative)


def test_cli_camera_frame_finds_the_sequences_calib_beside_the_scans(sequence, tmp_path):
    seq, poses, _, _ = sequence
    out = tmp_path / "05.txt"
    assert main(["odometry", str(seq / "velodyne"), "--frame", "camera", "--out", str(out)]) == 0
    assert np.allclose(read_poses(out), camera_poses(poses, TR), atol=1e-8)
    assert json.loads(sidecar_path(out).read_text())["calib"] == str(seq / "calib.txt")
    assert find_calib([seq / "velodyne" / "0.npy", tmp_path / "elsewhere.npy"]) is None


def test_cli_sidecar_follows_the_force_rule(sequence, tmp_path, capsys):
    seq, _, _, calls = sequence
    out = tmp_path / "05.txt"
    argv = ["odometry", str(seq / "velodyne"), "--out", str(out)]
    sidecar_path(out).write_text("{}")  # only the sidecar exists: still refused, before work
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        f"pcreg: error: {sidecar_path(out)}: already exists (use --force, or overwrite=True in "
        "Python, to replace it)"
    )
    assert not out.exists() and calls == []
    assert main([*argv, "--force", "--frame", "camera"]) == 0
    assert json.loads(sidecar_path(out).read_text())["frame"] == "camera"
    assert main([*argv, "--force"]) == 0  # both replaced: the record follows the poses
    assert json.loads(sidecar_path(out).read_text())["frame"] == "lidar"


def test_cli_camera_frame_without_calibration_is_one_clean_line(sequence, tmp_path, capsys):
    seq, _, _, calls = sequence
    (seq / "calib.txt").unlink()
    out = tmp_path / "05.txt"
    argv = ["odometry", str(seq / "velodyne"), "--frame", "camera", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pcreg: error: --calib: --frame camera needs")
    # a calibration named with the LiDAR frame would be ignored: refused instead
    assert main(["odometry", str(seq / "velodyne"), "--calib", str(tmp_path / "c.txt")]) == 2
    assert "only used with --frame camera" in capsys.readouterr().err
    # a malformed or missing calibration file: one line naming the file
    bad = tmp_path / "calib.txt"
    bad.write_text("Tr: 1 0 0\n")
    for calib, problem in ((bad, "Tr: needs 12 numbers"), (tmp_path / "no.txt", "not found")):
        assert main([*argv, "--calib", str(calib)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"pcreg: error: {calib}: ")
        assert problem in err
    assert calls == [] and not out.exists() and not sidecar_path(out).exists()
