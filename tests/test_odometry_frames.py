"""Odometry poses in the LiDAR or the camera frame: the conversion and the calibration it
reads. No data, no Ray."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg.data.kitti import camera_poses, read_calib_tr, velodyne_poses
from pcreg.errors import CorruptFileError, MissingFileError, NonRigidTransformError

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
