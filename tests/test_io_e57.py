"""E57 scans through pye57: each scan of a multi-scan file comes back in the file's world
frame (its pose applied), addressed as ``file.e57#K`` (0-based), checked against pye57's own
``read_scan(transform=True)``; a missing or out-of-range index is one clean line."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg import io
from pcreg.errors import CorruptFileError, InputError, NonFiniteError

pye57 = pytest.importorskip("pye57")


def quaternion(axis, angle_deg) -> np.ndarray:
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    half = np.radians(angle_deg) / 2
    return np.array([np.cos(half), *(np.sin(half) * axis)])


def rotation(q) -> np.ndarray:
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip


POSES = [
    (quaternion([0, 0, 1], 30), np.array([10.0, -4.0, 1.5])),
    (quaternion([1, 2, 3], -75), np.array([-3.0, 250.0, 0.25])),
]


def scans(n: int = 3000):
    """Points of two scans in their scanners' frames (float32 values: pye57 stores single
    precision) and their cartesianInvalidState (2: no return)."""
    rng = np.random.default_rng(0)
    local = [rng.uniform(-20, 20, (n, 3)), rng.uniform(-5, 5, (n + 17, 3))]
    local = [xyz.astype(np.float32).astype(np.float64) for xyz in local]
    invalid = [np.zeros(n, np.int8), (rng.random(n + 17) < 0.1).astype(np.int8) * 2]
    return local, invalid


def write_e57(path, local, invalid, poses) -> None:
    with pye57.E57(str(path), mode="w") as e57:
        for xyz, state, (q, t) in zip(local, invalid, poses, strict=True):
            data = {"cartesianX": xyz[:, 0], "cartesianY": xyz[:, 1], "cartesianZ": xyz[:, 2],
                    "cartesianInvalidState": state}  # fmt: skip
            e57.write_scan_raw(data, rotation=q, translation=t)


@pytest.fixture
def two_scans(tmp_path):
    local, invalid = scans()
    path = tmp_path / "site.e57"
    write_e57(path, local, invalid, POSES)
    return path, local, invalid


def test_each_scan_in_the_world_frame(two_scans):
    path, local, invalid = two_scans
    reference = pye57.E57(str(path))
    for k in range(2):
        points, info = io.read_points(f"{path}#{k}", return_info=True)
        q, t = POSES[k]
        valid = invalid[k] == 0
        np.testing.assert_allclose(points, local[k][valid] @ rotation(q).T + t, atol=1e-9)
        theirs = reference.read_scan(k, transform=True, ignore_missing_fields=True)
        expected = np.stack([theirs[c] for c in ("cartesianX", "cartesianY", "cartesianZ")], 1)
        np.testing.assert_allclose(points, expected, atol=1e-9)
        assert info.dropped_invalid == (~valid).sum() == info.dropped_marked
        assert info.source == f"{path}#{k}" and info.content.startswith(f"scan #{k} of 2")
    assert io.read_points(f"{path}#1").shape[0] < len(local[1])  # invalid points dropped


def test_invalid_points_are_counted_and_refused_when_strict(two_scans, caplog):
    path, _, invalid = two_scans
    io.read_points(f"{path}#1")
    assert f"{path}#1: dropped {(invalid[1] != 0).sum()} of {len(invalid[1])}" in caplog.text
    with pytest.raises(NonFiniteError, match="marked invalid by the E57 file"):
        io.read_points(f"{path}#1", nan_policy="error")
    io.read_points(f"{path}#0", nan_policy="error")  # a scan without invalid points


def test_several_scans_need_an_index(two_scans):
    path, _, _ = two_scans
    with pytest.raises(InputError) as err:
        io.read_points(path)
    assert str(err.value) == (
        f"{path}: E57 file holds 2 scans: address one as site.e57#0 to site.e57#1 (0-based)"
    )


@pytest.mark.parametrize("index", ["2", "-1", "17"])
def test_an_index_out_of_range_names_the_count(two_scans, index):
    path, _, _ = two_scans
    with pytest.raises(InputError) as err:
        io.read_points(f"{path}#{index}")
    message = str(err.value)
    assert message.startswith(f"{path}: scan #{int(index)} does not exist")
    assert "the file holds 2 scans (#0 to #1, 0-based)" in message and "\n" not in message


def test_an_index_that_is_not_a_number(two_scans):
    path, _, _ = two_scans
    with pytest.raises(InputError, match="'#first' is not a scan index"):
        io.read_points(f"{path}#first")


def test_one_scan_needs_no_index(tmp_path):
    local, invalid = scans()
    path = tmp_path / "one.e57"
    write_e57(path, local[:1], invalid[:1], POSES[:1])
    q, t = POSES[0]
    expected = local[0] @ rotation(q).T + t
    np.testing.assert_allclose(io.read_points(path), expected, atol=1e-9)
    np.testing.assert_allclose(io.read_points(f"{path}#0"), expected, atol=1e-9)


def test_a_selector_on_a_one_cloud_format_is_refused(tmp_path):
    np.save(tmp_path / "c.npy", np.random.default_rng(0).random((200, 3)))
    with pytest.raises(InputError, match=r"'#1' addresses one cloud inside a file"):
        io.read_points(f"{tmp_path / 'c.npy'}#1")


def test_a_name_with_a_hash_that_exists_is_taken_whole(tmp_path):
    pts = np.random.default_rng(0).random((200, 3))
    np.save(tmp_path / "run#3.npy", pts)
    np.testing.assert_array_equal(io.read_points(tmp_path / "run#3.npy"), pts)


def test_a_corrupt_e57_is_one_line(tmp_path):
    (tmp_path / "bad.e57").write_bytes(b"ASTM-E57" + bytes(range(256)) * 8)
    with pytest.raises(CorruptFileError) as err:
        io.read_points(tmp_path / "bad.e57")
    assert str(err.value).startswith(f"{tmp_path / 'bad.e57'}: cannot be read as E57")
    assert "\n" not in str(err.value)
