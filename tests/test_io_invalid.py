"""Invalid points are read by default: an organised RGB-D cloud (640x480, NaN where a pixel
has no depth, PCL/ROS convention) loses those points with one warning that names the file
and counts them, as Open3D's reader (``remove_nan_points=True``) would; ``nan_policy="error"``
(``--strict-input``) refuses it; a truncated file is still refused."""

from __future__ import annotations

import argparse
import logging

import numpy as np
import pytest
from cloud_files import depth_image_cloud, pcd_bytes, write_pcd, xyz_columns

from pcreg import io
from pcreg.errors import CorruptFileError, EmptyCloudError, NonFiniteError

o3d = pytest.importorskip("open3d")

KINDS = ["ascii", "binary", "binary_compressed"]


def open3d_points(path) -> np.ndarray:
    cloud = o3d.io.read_point_cloud(str(path), remove_nan_points=True, remove_infinite_points=True)
    return np.asarray(cloud.points)


@pytest.mark.parametrize("kind", KINDS)
def test_organised_depth_cloud_drops_nan_pixels(tmp_path, caplog, kind):
    xyz, valid = depth_image_cloud()
    path = write_pcd(tmp_path / f"rgbd_{kind}.pcd", xyz_columns(xyz), kind, width=640, height=480)
    with caplog.at_level(logging.WARNING, logger="pcreg.io"):
        points, info = io.read_points(path, return_info=True)
    np.testing.assert_array_equal(points, open3d_points(path))
    np.testing.assert_array_equal(points, xyz[valid].astype(np.float64))
    holes = int((~valid).sum())
    assert info.dropped_invalid == holes and info.dropped_marked == 0
    assert info.total == 640 * 480 and info.kept == len(points)
    assert info.organized == (480, 640) and not info.mostly_invalid
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert str(path) in warnings[0] and f"dropped {holes} of {640 * 480}" in warnings[0]
    # the default of read_points is to drop; without return_info it is the array alone
    np.testing.assert_array_equal(io.read_points(path), points)


def test_strict_input_refuses_the_invalid_points(tmp_path):
    xyz, valid = depth_image_cloud()
    path = write_pcd(tmp_path / "rgbd.pcd", xyz_columns(xyz), width=640, height=480)
    with pytest.raises(NonFiniteError) as err:
        io.read_points(path, nan_policy="error")
    message = str(err.value)
    assert message.startswith(f"{path}: {int((~valid).sum())} of 307200 points are invalid")
    assert "--strict-input" in message and "\n" not in message


def test_organised_zero_pixels_are_invalid_too(tmp_path):
    """Drivers that do not write NaN leave (0, 0, 0) in a pixel without depth: in an organised
    cloud the origin is never a measured point."""
    xyz, valid = depth_image_cloud(hole_fraction=0.2)
    zeros = np.zeros(len(xyz), bool)
    zeros[np.flatnonzero(valid)[::7]] = True
    xyz[zeros] = 0.0
    path = write_pcd(tmp_path / "zeros.pcd", xyz_columns(xyz), width=640, height=480)
    points, info = io.read_points(path, return_info=True)
    reference = open3d_points(path)  # Open3D keeps the zeros: drop them for the comparison
    np.testing.assert_array_equal(points, reference[(reference != 0).any(axis=1)])
    assert info.dropped_marked == zeros.sum()
    assert info.dropped_invalid == (~valid).sum() + zeros.sum()
    with pytest.raises(NonFiniteError, match=r"\(0, 0, 0\) pixels"):
        io.read_points(path, nan_policy="error")


def test_origin_is_a_real_point_of_an_unorganised_cloud(tmp_path):
    xyz = np.random.default_rng(1).uniform(-1, 1, (500, 3))
    xyz[10] = 0.0
    path = write_pcd(tmp_path / "flat.pcd", xyz_columns(xyz, np.float64))
    points, info = io.read_points(path, return_info=True)
    np.testing.assert_array_equal(points, xyz)
    assert info.dropped_invalid == 0 and info.organized is None


@pytest.mark.parametrize(("holes", "what"), [(0.95, "95"), (0.9995, "few")])
def test_a_mostly_invalid_cloud_says_so(tmp_path, caplog, holes, what):
    xyz, valid = depth_image_cloud(hole_fraction=holes)
    path = write_pcd(tmp_path / "sparse.pcd", xyz_columns(xyz), width=640, height=480)
    with caplog.at_level(logging.WARNING, logger="pcreg.io"):
        points, info = io.read_points(path, return_info=True)
    assert info.mostly_invalid and len(points) == valid.sum()
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert str(path) in warning
    assert f"most of the cloud is invalid: only {valid.sum()} of 307200 points are valid" in warning


def test_an_all_invalid_cloud_is_refused(tmp_path):
    xyz = np.full((640 * 480, 3), np.nan, np.float32)
    path = write_pcd(tmp_path / "blind.pcd", xyz_columns(xyz), width=640, height=480)
    with pytest.raises(EmptyCloudError, match="no valid points: all 307200 are invalid"):
        io.read_points(path)


@pytest.mark.parametrize("kind", KINDS)
def test_a_truncated_organised_cloud_is_still_refused(tmp_path, kind):
    xyz, _ = depth_image_cloud(48, 64)
    data = pcd_bytes(xyz_columns(xyz), kind, width=64, height=48)
    (tmp_path / "cut.pcd").write_bytes(data[: len(data) - 100])
    with pytest.raises(CorruptFileError, match=r"cut\.pcd: "):
        io.read_points(tmp_path / "cut.pcd")


def test_strict_input_flag_and_the_old_alias():
    from pcreg.commands._common import add_input_arguments, nan_policy

    parser = argparse.ArgumentParser()
    add_input_arguments(parser)
    assert nan_policy(parser.parse_args([])) == "drop"
    assert nan_policy(parser.parse_args(["--strict-input"])) == "error"
    assert nan_policy(parser.parse_args(["--drop-nonfinite"])) == "drop"  # a no-op now
    assert "--drop-nonfinite" not in parser.format_help()
    assert "--strict-input" in parser.format_help()
