"""pcreg's PCD and PLY readers against Open3D's on files written the way real tools write
them: every DATA kind, the field sets of depth cameras and LiDAR drivers (normals, packed
rgb, intensity, ring, time), float64 coordinates, organised layouts with NaN, both PLY byte
orders, and a LiDAR vendor's "WIDTH 0 / HEIGHT 0 / POINTS n" header."""

from __future__ import annotations

import numpy as np
import pytest
from cloud_files import depth_image_cloud, pcd_bytes, ply_bytes, write_pcd, xyz_columns

from pcreg import io
from pcreg.errors import CorruptFileError

o3d = pytest.importorskip("open3d")

KINDS = ["ascii", "binary", "binary_compressed"]
N = 2000


def open3d_points(path) -> np.ndarray:
    """Open3D's tensor reader (its legacy ``o3d.io`` reader returns zeros for the F8 fields
    of a binary PCD, Open3D 0.19-0.20), as float64, NaN/Inf rows removed (its own option for
    that is unimplemented there)."""
    xyz = o3d.t.io.read_point_cloud(str(path)).point.positions.numpy().astype(np.float64)
    return xyz[np.isfinite(xyz).all(axis=1)]


def scan(n: int = N, dtype=np.float32, seed: int = 0) -> dict[str, np.ndarray]:
    """A LiDAR-like scan: points on a few rings around the sensor, x, y, z of ``dtype``."""
    rng = np.random.default_rng(seed)
    angle = rng.uniform(0, 2 * np.pi, n)
    ring = rng.integers(0, 16, n)
    r = rng.uniform(2, 40, n)
    xyz = np.stack([r * np.cos(angle), r * np.sin(angle), r * np.tan(np.radians(ring - 8))], 1)
    return xyz_columns(xyz, dtype)


def extra_fields(name: str, n: int = N) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    if name == "normals":
        normals = rng.standard_normal((n, 3))
        normals /= np.linalg.norm(normals, axis=1, keepdims=True)
        cols = {f"normal_{a}": normals[:, i].astype(np.float32) for i, a in enumerate("xyz")}
        return {**cols, "curvature": rng.random(n).astype(np.float32)}
    if name == "rgb":  # PCL packs r, g, b into the bytes of a float32
        packed = (rng.integers(0, 1 << 24, n, dtype=np.uint32)).view(np.float32)
        return {"rgb": packed}
    if name == "intensity":
        return {"intensity": rng.uniform(0, 255, n).astype(np.float32)}
    if name == "ring-time":
        ring = rng.integers(0, 16, n).astype(np.uint16)
        return {"intensity": rng.random(n).astype(np.float32), "ring": ring,
                "time": rng.random(n).astype(np.float32)}  # fmt: skip
    return {}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fields", ["xyz", "normals", "rgb", "intensity", "ring-time"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f4", "f8"])
def test_pcd_matches_open3d(tmp_path, kind, fields, dtype):
    columns = {**scan(dtype=dtype), **extra_fields(fields)}
    path = write_pcd(tmp_path / "scan.pcd", columns, kind)
    points = io.read_points(path)
    np.testing.assert_array_equal(points, open3d_points(path))
    assert points.shape == (N, 3)


def test_pcd_fields_in_any_order(tmp_path):
    base = scan()
    ring = extra_fields("ring-time")["ring"]
    columns = {"intensity": ring.astype(np.float32), "z": base["z"], "x": base["x"],
               "ring": ring, "y": base["y"]}  # fmt: skip
    for kind in KINDS:
        path = write_pcd(tmp_path / f"{kind}.pcd", columns, kind)
        np.testing.assert_array_equal(io.read_points(path), open3d_points(path))


@pytest.mark.parametrize("kind", KINDS)
def test_organised_pcd_with_nan_matches_open3d(tmp_path, kind):
    xyz, valid = depth_image_cloud()
    columns = {**xyz_columns(xyz), "rgb": extra_fields("rgb", len(xyz))["rgb"]}
    path = write_pcd(tmp_path / "rgbd.pcd", columns, kind, width=640, height=480)
    points, info = io.read_points(path, return_info=True)
    np.testing.assert_array_equal(points, open3d_points(path))
    assert info.organized == (480, 640) and info.dropped_invalid == (~valid).sum()


@pytest.mark.parametrize("kind", KINDS)
def test_pcd_width_0_height_0_with_points_is_read(tmp_path, kind):
    """A LiDAR vendor's tool writes WIDTH 0, HEIGHT 0 and the count in POINTS alone."""
    columns = {**scan(), **extra_fields("intensity")}
    path = write_pcd(tmp_path / "vendor.pcd", columns, kind, width=0, height=0)
    assert b"WIDTH 0\nHEIGHT 0\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS 2000" in path.read_bytes()
    points, info = io.read_points(path, return_info=True)
    np.testing.assert_array_equal(points, open3d_points(path))
    assert points.shape == (N, 3) and info.organized is None


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("declared", [N - 1, N + 1, 0])
def test_pcd_width_0_with_another_count_is_refused(tmp_path, kind, declared):
    """The count is given once: data of another length is still corrupt, never padded."""
    data = pcd_bytes(scan(), kind, width=0, height=0, points=declared)
    (tmp_path / "bad.pcd").write_bytes(data)
    with pytest.raises(CorruptFileError, match=r"bad\.pcd: "):
        io.read_points(tmp_path / "bad.pcd")


@pytest.mark.parametrize(
    ("before", "after", "read"),
    [
        (b"", b"\n", True),  # a writer that ends the file with a line break
        (b"", b"\r\n", True),
        (b"\xef\xbb\xbf", b"", True),  # an editor's byte-order mark
        (b"", b"\n" * 12, False),  # a whole record's worth (12 bytes): data, not a line break
        (b"", b"x\n", False),
    ],
)
def test_a_binary_pcd_with_a_closing_line_break_or_a_bom_is_read(tmp_path, before, after, read):
    """Open3D reads these; pcreg called the line break "1 bytes follow the points the header
    declares: corrupt" and the BOM "not a PCD file". More than a line break is still corrupt."""
    (tmp_path / "c.pcd").write_bytes(before + pcd_bytes(scan(), "binary") + after)
    if read:
        np.testing.assert_array_equal(
            io.read_points(tmp_path / "c.pcd"), open3d_points(tmp_path / "c.pcd")
        )
    else:
        with pytest.raises(CorruptFileError, match="follow the 2000 points the header declares"):
            io.read_points(tmp_path / "c.pcd")


def test_pcd_width_that_disagrees_with_points_is_still_refused(tmp_path):
    data = pcd_bytes(scan(), "binary", width=1000, height=1)
    (tmp_path / "bad.pcd").write_bytes(data)
    with pytest.raises(CorruptFileError, match="WIDTH 1000 x HEIGHT 1 != POINTS 2000"):
        io.read_points(tmp_path / "bad.pcd")


@pytest.mark.parametrize("fmt", ["ascii", "binary_little_endian", "binary_big_endian"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float", "double"])
def test_ply_matches_open3d(tmp_path, fmt, dtype):
    rng = np.random.default_rng(2)
    columns = {**scan(dtype=dtype), "nx": rng.random(N).astype(np.float32),
               "red": rng.integers(0, 255, N).astype(np.uint8)}  # fmt: skip
    path = tmp_path / "scan.ply"
    path.write_bytes(ply_bytes(columns, fmt))
    points = io.read_points(path)
    np.testing.assert_array_equal(points, open3d_points(path))
    expected = np.stack([columns[a] for a in "xyz"], 1).astype(np.float64)
    np.testing.assert_array_equal(points, expected)


def test_ply_written_by_open3d(tmp_path):
    """Open3D's own writer (binary little-endian, double, with normals and colours)."""
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.stack(
        [scan(dtype=np.float64)[a] for a in "xyz"], 1)))  # fmt: skip
    cloud.estimate_normals()
    cloud.paint_uniform_color([0.2, 0.4, 0.6])
    for ascii_ in (False, True):
        path = tmp_path / f"o3d_{ascii_}.ply"
        assert o3d.io.write_point_cloud(str(path), cloud, write_ascii=ascii_)
        np.testing.assert_array_equal(io.read_points(path), open3d_points(path))
