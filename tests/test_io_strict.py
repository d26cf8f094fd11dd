"""pcreg.io readers are strict and keep float64: a truncated or corrupt PLY/PCD/LAS is an
error (never zero-padded or cut short), NaN/Inf are dropped and counted (refused under
nan_policy="error"), georeferenced coordinates
survive to the bit, and no reader prints anything."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from pcreg import io
from pcreg.errors import CorruptFileError, EmptyCloudError, NonFiniteError
from pcreg.io_formats import read_ply

N = 500

# (name, suffix, header format / DATA kind)
PLY_KINDS = [
    ("ply-ascii", "ascii"),
    ("ply-binary-le", "binary_little_endian"),
    ("ply-binary-be", "binary_big_endian"),
]
PCD_KINDS = [("pcd-ascii", "ascii"), ("pcd-binary", "binary")]
ALL_KINDS = [(name, kind) for name, kind in PLY_KINDS + PCD_KINDS]


@pytest.fixture(autouse=True)
def _silent(capfd):
    """Nothing a reader does may reach stdout or stderr (Open3D/RPly used to print)."""
    yield
    out, err = capfd.readouterr()
    assert out == "" and err == "", (out, err)


def utm_cloud(n: int = N, seed: int = 0) -> np.ndarray:
    """float64 points at UTM-like offsets (easting 5e5 m, northing 4.2e6 m) with sub-mm
    detail that float32 (spacing 0.5 m at 4.2e6) cannot hold."""
    rng = np.random.default_rng(seed)
    return rng.uniform(-50, 50, (n, 3)) + np.array([512_345.0, 4_212_345.0, 120.0])


def ply_bytes(
    xyz: np.ndarray,
    fmt: str = "ascii",
    *,
    ptype: str = "double",
    faces: list[list[int]] | None = None,
    faces_first: bool = False,
) -> bytes:
    """A PLY of ``xyz`` (vertex properties x, y, z of type ``ptype``, plus an ``nx`` double and
    a ``red`` uchar between them), optionally with a face element (list uchar int)."""
    vertex = [
        f"element vertex {len(xyz)}",
        f"property {ptype} x",
        "property double nx",
        f"property {ptype} y",
        "property uchar red",
        f"property {ptype} z",
    ]
    face = [f"element face {len(faces)}", "property list uchar int vertex_indices"] if faces else []
    elements = face + vertex if faces_first else vertex + face
    header = ["ply", f"format {fmt} 1.0", "comment test", *elements, "end_header"]
    out = ("\n".join(header) + "\n").encode()
    vals = xyz.astype(np.dtype({"double": "f8", "float": "f4", "int": "i4", "short": "i2"}[ptype]))
    if fmt == "ascii":
        rows = [f"{x!r} 0.5 {y!r} 7 {z!r}" for x, y, z in vals.tolist()]
        face_rows = [" ".join(map(str, [len(f), *f])) for f in faces or []]
        body = face_rows + rows if faces_first else rows + face_rows
        return out + ("\n".join(body) + "\n").encode()
    order = "<" if fmt == "binary_little_endian" else ">"
    code = order + vals.dtype.str[1:]
    layout = np.dtype([("x", code), ("nx", order + "f8"), ("y", code), ("red", "u1"), ("z", code)])
    table = np.zeros(len(xyz), layout)
    table["x"], table["y"], table["z"], table["nx"], table["red"] = *vals.T, 0.5, 7
    face_bytes = b"".join(struct.pack(f"{order}B{len(f)}i", len(f), *f) for f in faces or [])
    return out + (face_bytes + table.tobytes() if faces_first else table.tobytes() + face_bytes)


def pcd_bytes(xyz: np.ndarray, data: str = "ascii", *, size: int = 8) -> bytes:
    """A PCD of ``xyz`` with fields x y z intensity (x, y, z of ``size`` bytes)."""
    header = (
        "# .PCD v0.7 - Point Cloud Data file format\nVERSION 0.7\nFIELDS x y z intensity\n"
        f"SIZE {size} {size} {size} 4\nTYPE F F F F\nCOUNT 1 1 1 1\nWIDTH {len(xyz)}\n"
        f"HEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS {len(xyz)}\nDATA {data}\n"
    ).encode()
    vals = xyz.astype(f"<f{size}")
    if data == "ascii":
        return (
            header
            + ("\n".join(f"{x!r} {y!r} {z!r} 1.5" for x, y, z in vals.tolist()) + "\n").encode()
        )
    table = np.zeros(
        len(xyz), [("x", f"<f{size}"), ("y", f"<f{size}"), ("z", f"<f{size}"), ("i", "<f4")]
    )
    table["x"], table["y"], table["z"], table["i"] = *vals.T, 1.5
    return header + table.tobytes()


def make(name: str, kind: str, xyz: np.ndarray, **kw) -> tuple[str, bytes]:
    if name.startswith("ply"):
        return ".ply", ply_bytes(xyz, kind, **kw)
    return ".pcd", pcd_bytes(xyz, kind, **kw)


def header_lines(data: bytes) -> int:
    """Lines in a PLY/PCD header (up to end_header / DATA)."""
    marker = b"end_header\n" if data.startswith(b"ply") else b"DATA ascii\n"
    return data[: data.index(marker) + len(marker)].count(b"\n")


@pytest.mark.parametrize(("name", "kind"), ALL_KINDS)
def test_utm_coordinates_round_trip_exactly(tmp_path, name, kind):
    xyz = utm_cloud()
    suffix, data = make(name, kind, xyz)
    path = tmp_path / f"c{suffix}"
    path.write_bytes(data)
    got = io.read_points(path)
    assert got.dtype == np.float64 and got.shape == (N, 3) and got.flags.c_contiguous
    np.testing.assert_allclose(got, xyz, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(got, xyz)  # in fact to the bit
    np.testing.assert_array_equal(io.read_points(path), got)  # and the same every time


@pytest.mark.parametrize(("name", "kind"), ALL_KINDS)
def test_float32_values_convert_exactly(tmp_path, name, kind):
    xyz = utm_cloud().astype(np.float32)
    opts = {"ptype": "float"} if name.startswith("ply") else {"size": 4}
    suffix, data = make(name, kind, xyz.astype(np.float64), **opts)
    (tmp_path / f"c{suffix}").write_bytes(data)
    np.testing.assert_array_equal(io.read_points(tmp_path / f"c{suffix}"), xyz)


@pytest.mark.parametrize("ply_type", ["int", "short"])
@pytest.mark.parametrize("fmt", ["ascii", "binary_big_endian"])
def test_ply_integer_coordinates(tmp_path, ply_type, fmt):
    xyz = np.arange(30.0).reshape(10, 3) - 7
    (tmp_path / "i.ply").write_bytes(ply_bytes(xyz, fmt, ptype=ply_type))
    np.testing.assert_array_equal(io.read_points(tmp_path / "i.ply"), xyz)


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
@pytest.mark.parametrize(("name", "kind"), ALL_KINDS)
def test_truncated_files_are_errors(tmp_path, name, kind, fraction):
    suffix, data = make(name, kind, utm_cloud())
    path = tmp_path / f"cut{suffix}"
    path.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(CorruptFileError) as info:
        io.read_points(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message


@pytest.mark.parametrize("name", ["ply", "pcd"])
@pytest.mark.parametrize(
    ("change", "words"),
    [("token", "non-numeric value 'a1.5'"), ("short", "found 2"), ("long", "found 6")],
)
def test_corrupt_middle_line_is_named(tmp_path, name, change, words):
    suffix, data = make(f"{name}-ascii", "ascii", utm_cloud())
    lines = data.split(b"\n")
    number = header_lines(data) + 251  # the 251st point
    tokens = lines[number - 1].split()
    if change == "token":
        tokens[1] = b"a1.5"
    elif change == "short":
        tokens = tokens[:2]
    else:
        tokens += [b"1"] * (6 - len(tokens))
    lines[number - 1] = b" ".join(tokens)
    path = tmp_path / f"c{suffix}"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(CorruptFileError) as info:
        io.read_points(path)
    assert f"line {number}:" in str(info.value) and words in str(info.value), str(info.value)


@pytest.mark.parametrize(("name", "kind"), ALL_KINDS)
def test_count_mismatch_and_absurd_counts(tmp_path, name, kind):
    suffix, data = make(name, kind, utm_cloud())
    tag = b"vertex 500" if name.startswith("ply") else b"POINTS 500"
    for count in (b"499", b"501", b"1000000000"):
        changed = data.replace(tag, tag[:-3] + count)
        if name.startswith("pcd"):
            changed = changed.replace(b"WIDTH 500", b"WIDTH " + count)
        path = tmp_path / f"n{count.decode()}{suffix}"
        path.write_bytes(changed)
        with pytest.raises(CorruptFileError):
            io.read_points(path)


def test_pcd_width_height_must_match_points(tmp_path):
    data = pcd_bytes(utm_cloud(), "binary").replace(b"WIDTH 500", b"WIDTH 400")
    (tmp_path / "c.pcd").write_bytes(data)
    with pytest.raises(CorruptFileError, match="WIDTH 400 x HEIGHT 1 != POINTS 500"):
        io.read_points(tmp_path / "c.pcd")


@pytest.mark.parametrize("token", ["inf", "-inf", "nan", "NaN", "1e999"])
@pytest.mark.parametrize("name", ["ply", "pcd"])
def test_non_finite_text_values(tmp_path, name, token):
    xyz = utm_cloud(20)
    suffix, data = make(f"{name}-ascii", "ascii", xyz)
    lines = data.split(b"\n")
    row = header_lines(data) + 5
    parts = lines[row - 1].split()
    parts[2 if name == "ply" else 1] = token.encode()  # the y value
    lines[row - 1] = b" ".join(parts)
    path = tmp_path / f"c{suffix}"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(NonFiniteError) as info:
        io.read_points(path, nan_policy="error")
    message = str(info.value)
    assert "1 of 20 points" in message and "--strict-input" in message
    assert "use nan_policy" not in message
    kept = io.read_points(path)
    np.testing.assert_array_equal(kept, np.delete(xyz, 4, axis=0))


@pytest.mark.parametrize(("name", "kind"), [k for k in ALL_KINDS if k[1] != "ascii"])
def test_non_finite_binary_values(tmp_path, name, kind):
    xyz = utm_cloud(20)
    xyz[3, 0], xyz[7, 2] = np.inf, np.nan
    suffix, data = make(name, kind, xyz)
    (tmp_path / f"c{suffix}").write_bytes(data)
    with pytest.raises(NonFiniteError, match="2 of 20 points"):
        io.read_points(tmp_path / f"c{suffix}", nan_policy="error")
    assert io.read_points(tmp_path / f"c{suffix}").shape == (18, 3)


TRIANGLES = [[0, 1, 2], [2, 3, 4], [5, 6, 7]]
MIXED = [[0, 1, 2], [2, 3, 4, 5], [5, 6, 7], [1, 2, 3, 4, 5]]


@pytest.mark.parametrize("faces", [TRIANGLES, MIXED], ids=["triangles", "mixed"])
@pytest.mark.parametrize("faces_first", [False, True], ids=["faces-after", "faces-before"])
@pytest.mark.parametrize("fmt", [k for _, k in PLY_KINDS])
def test_mesh_ply_reads_its_vertices(tmp_path, fmt, faces, faces_first):
    xyz = utm_cloud(8)
    data = ply_bytes(xyz, fmt, faces=faces, faces_first=faces_first)
    (tmp_path / "mesh.ply").write_bytes(data)
    np.testing.assert_array_equal(read_ply(tmp_path / "mesh.ply").xyz, xyz)
    # 8 vertices 50 m apart do not stand for the surface: read_points samples it
    # (tests/test_io_mesh.py), or keeps the vertices where Open3D cannot read the polygons
    read = io.read_points(tmp_path / "mesh.ply")
    assert len(read) == 8 or len(read) >= 10_000
    # cut inside the faces (last element) or the vertices: an error either way
    (tmp_path / "cut.ply").write_bytes(data[:-30])
    with pytest.raises(CorruptFileError):
        io.read_points(tmp_path / "cut.ply")


def test_mesh_ply_bad_face_row(tmp_path):
    data = ply_bytes(utm_cloud(8), "ascii", faces=TRIANGLES)
    (tmp_path / "m.ply").write_bytes(data.replace(b"\n3 2 3 4\n", b"\n3 2 3\n"))
    with pytest.raises(CorruptFileError, match="malformed face row"):
        io.read_points(tmp_path / "m.ply")


@pytest.mark.parametrize("fmt", ["ascii", "binary_little_endian"])
def test_trailing_data_is_an_error(tmp_path, fmt):
    xyz = utm_cloud(10)
    extra = ply_bytes(utm_cloud(1), fmt)
    extra = extra[extra.index(b"end_header\n") + 11 :]
    (tmp_path / "c.ply").write_bytes(ply_bytes(xyz, fmt) + extra)
    with pytest.raises(CorruptFileError, match="follow the last PLY element"):
        io.read_points(tmp_path / "c.ply")


@pytest.mark.parametrize(
    ("header", "words"),
    [
        (b"ply\nformat ascii 1.0\nelement face 0\nend_header\n", "no 'vertex' element"),
        (b"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nend_header\n1\n", "'y'"),
        (b"ply\nelement vertex 1\nproperty float x\nend_header\n1\n", "no format line"),
        (b"ply\nformat ascii 1.0\nelement vertex 1\nproperty half x\nend_header\n", "bad property"),
        (b"ply\nformat ascii 1.0\nelement vertex 1\n", "no end_header"),
    ],
)
def test_bad_ply_headers(tmp_path, header, words):
    (tmp_path / "h.ply").write_bytes(header)
    with pytest.raises(CorruptFileError, match=words):
        io.read_points(tmp_path / "h.ply")


def test_empty_vertex_element_is_an_empty_cloud(tmp_path):
    (tmp_path / "e.ply").write_bytes(ply_bytes(np.zeros((0, 3)), "binary_little_endian"))
    with pytest.raises(EmptyCloudError):
        io.read_points(tmp_path / "e.ply")


@pytest.mark.parametrize("kind", ["ascii", "binary"])
@pytest.mark.parametrize("width, height", [(0, 1), (0, 0)])
def test_a_pcd_of_no_points_is_an_empty_cloud(tmp_path, kind, width, height):
    """``POINTS 0`` with nothing after ``DATA``: an empty cloud, said so, in every DATA kind
    (a binary one raised numpy's ValueError, an internal error at the command line)."""
    header = (
        "VERSION 0.7\nFIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\n"
        f"WIDTH {width}\nHEIGHT {height}\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS 0\nDATA {kind}\n"
    )
    (tmp_path / "none.pcd").write_text(header)
    with pytest.raises(EmptyCloudError, match="point cloud is empty"):
        io.read_points(tmp_path / "none.pcd")


@pytest.mark.open3d
def test_binary_compressed_pcd(tmp_path):
    o3d = pytest.importorskip("open3d")
    xyz = utm_cloud(2000).astype(np.float32)
    xyz[:1000] = xyz[0]  # repeated rows: LZF back-references, overlapping ones too
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(xyz.astype(np.float64)))
    path = tmp_path / "c.pcd"
    assert o3d.io.write_point_cloud(str(path), cloud, compressed=True)
    data = path.read_bytes()
    assert b"DATA binary_compressed" in data
    np.testing.assert_array_equal(io.read_points(path), xyz.astype(np.float64))
    for fraction in (0.5, 0.9, 0.999):
        (tmp_path / "cut.pcd").write_bytes(data[: int(len(data) * fraction)])
        with pytest.raises(CorruptFileError, match="truncated"):
            io.read_points(tmp_path / "cut.pcd")
    capfd_note = "o3d writes nothing either"  # the autouse fixture checks the fds
    assert capfd_note


def test_lzf_decompress_rejects_bad_streams():
    from pcreg.io_formats import lzf_decompress

    assert lzf_decompress(b"\x02abc\xe0\x03\x02", 15) == b"abc" + b"abc" * 4
    for stream, size in [(b"\x05ab", 6), (b"\x20\x05", 4), (b"\x01ab", 3)]:
        with pytest.raises(ValueError):
            lzf_decompress(stream, size)


def _las(path, xyz, scales=(1e-3, 1e-3, 1e-3)):
    laspy = pytest.importorskip("laspy")
    las = laspy.create(point_format=3, file_version="1.2")
    las.header.scales = list(scales)
    las.header.offsets = [512_000.0, 4_212_000.0, 0.0]
    las.x, las.y, las.z = xyz.T
    las.write(path)
    return las


def test_las_keeps_utm_precision(tmp_path):
    xyz = np.round(utm_cloud(50), 3)
    _las(tmp_path / "c.las", xyz)
    np.testing.assert_allclose(io.read_points(tmp_path / "c.las"), xyz, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    ("value", "words"), [(0.0, "scale is 0"), (np.nan, "not finite"), (-1e-3, "negative")]
)
def test_las_bad_scale_is_an_error(tmp_path, value, words):
    path = tmp_path / "c.las"
    _las(path, utm_cloud(50))
    data = bytearray(path.read_bytes())
    data[139:147] = struct.pack("<d", value)  # the y scale (header offset 131 + 8)
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=words) as info:
        io.read_points(path)
    assert str(info.value).startswith(f"{path}: ") and "y scale" in str(info.value)


def test_las_offset_must_be_finite(tmp_path):
    path = tmp_path / "c.las"
    _las(path, utm_cloud(50))
    data = bytearray(path.read_bytes())
    data[155:163] = struct.pack("<d", np.inf)  # the x offset
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="not finite"):
        io.read_points(path)


@pytest.mark.parametrize("suffix", [".las", ".laz"])
def test_truncated_las_is_an_error(tmp_path, suffix, caplog):
    import laspy

    path = tmp_path / f"c{suffix}"
    _las(path, utm_cloud(100))
    data = path.read_bytes()
    header = laspy.read(path).header
    sizes = [int(len(data) * f) for f in (0.5, 0.9)]
    if suffix == ".las":  # a cut after 60 whole records: laspy itself returns those 60 points
        sizes.append(header.offset_to_point_data + 60 * header.point_format.size)
    for size in sizes:
        path.write_bytes(data[:size])
        with pytest.raises(CorruptFileError):
            io.read_points(path)
    assert not [r for r in caplog.records if r.name.startswith("laspy")]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("suffix", [".ply", ".npy"])
def test_write_points_keeps_what_it_is_given(tmp_path, suffix, dtype):
    xyz = utm_cloud(100)
    if dtype == np.float32:  # float32 near the origin (at UTM offsets it is refused as lossy)
        xyz = xyz - np.floor(xyz.min(0))
    xyz = xyz.astype(dtype)
    path = io.write_points(tmp_path / f"c{suffix}", xyz)
    np.testing.assert_array_equal(io.read_points(path), xyz)
    # float32 only when that loses nothing: 12 bytes a point, else 24
    per_point = 12 if dtype == np.float32 else 24
    assert abs(path.stat().st_size - 100 * per_point) < 300


@pytest.mark.parametrize("fmt", [k for _, k in PLY_KINDS])
def test_ply_vertex_with_a_list_property(tmp_path, fmt):
    """x, y, z around a list property of varying length, found row by row."""
    xyz = utm_cloud(4)
    header = (
        f"ply\nformat {fmt} 1.0\nelement vertex 4\nproperty float w\nproperty list uchar "
        "short tags\nproperty double x\nproperty double y\nproperty list ushort int more\n"
        "property double z\nend_header\n"
    ).encode()
    order = ">" if fmt == "binary_big_endian" else "<"
    rows = []
    for k, (x, y, z) in enumerate(xyz.tolist()):
        tags, more = list(range(k)), [9] * (2 - k % 2)
        if fmt == "ascii":
            fields = [1.5, len(tags), *tags, repr(x), repr(y), len(more), *more, repr(z)]
            rows.append(" ".join(map(str, fields)).encode() + b"\n")
        else:
            rows.append(
                struct.pack(f"{order}fB{len(tags)}hdd", 1.5, len(tags), *tags, x, y)
                + struct.pack(f"{order}H{len(more)}id", len(more), *more, z)
            )
    (tmp_path / "v.ply").write_bytes(header + b"".join(rows))
    np.testing.assert_array_equal(io.read_points(tmp_path / "v.ply"), xyz)
    (tmp_path / "cut.ply").write_bytes(header + b"".join(rows)[:-30])
    with pytest.raises(CorruptFileError):
        io.read_points(tmp_path / "cut.ply")


def test_ply_with_crlf_lines(tmp_path):
    xyz = utm_cloud(10)
    data = ply_bytes(xyz, "ascii").replace(b"\n", b"\r\n")
    (tmp_path / "c.ply").write_bytes(data)
    np.testing.assert_array_equal(io.read_points(tmp_path / "c.ply"), xyz)
    binary = ply_bytes(xyz, "binary_little_endian")
    end = binary.index(b"end_header\n")
    crlf = binary[:end].replace(b"\n", b"\r\n") + b"end_header\r\n" + binary[end + 11 :]
    (tmp_path / "b.ply").write_bytes(crlf)
    np.testing.assert_array_equal(io.read_points(tmp_path / "b.ply"), xyz)


@pytest.mark.parametrize("data", ["ascii", "binary"])
def test_pcd_fields_by_name_with_counts_and_padding(tmp_path, data):
    """PCL layouts: fields before x, a COUNT > 1 descriptor, a '_' padding field, integer
    coordinates, an organised cloud (HEIGHT > 1)."""
    xyz = np.arange(24, dtype=np.int32).reshape(8, 3) * 1000 - 5
    header = (
        "VERSION .7\nFIELDS rgb x _ y desc z\nSIZE 4 4 1 4 4 4\nTYPE U I U I F I\n"
        f"COUNT 1 1 3 1 2 1\nWIDTH 4\nHEIGHT 2\nPOINTS 8\nDATA {data}\n"
    ).encode()
    layout = np.dtype(
        [("rgb", "<u4"), ("x", "<i4"), ("_", "u1", 3), ("y", "<i4"), ("d", "<f4", 2), ("z", "<i4")]
    )
    table = np.zeros(8, layout)
    table["x"], table["y"], table["z"] = xyz.T
    if data == "ascii":
        body = "\n".join(f"0 {x} 0 0 0 {y} 0.5 nan {z}" for x, y, z in xyz.tolist()).encode()
    else:
        body = table.tobytes()
    (tmp_path / "c.pcd").write_bytes(header + body)
    np.testing.assert_array_equal(io.read_points(tmp_path / "c.pcd"), xyz)


def test_a_las_header_claiming_more_points_than_the_file_holds_is_refused_fast(tmp_path):
    """A header declaring 2^32 - 1 points in a file of a few hundred bytes: refused from the
    file's size, before laspy allocates anything (it used to try over 8 GB)."""
    import struct
    import time

    laspy = pytest.importorskip("laspy")
    from pcreg.errors import CorruptFileError
    from pcreg.io import read_points

    las = laspy.create(point_format=0, file_version="1.2")
    las.x, las.y, las.z = np.arange(10.0), np.arange(10.0), np.arange(10.0)
    path = tmp_path / "big.las"
    las.write(path)
    raw = bytearray(path.read_bytes())
    raw[107:111] = struct.pack("<I", 2**32 - 1)  # legacy point count of a 1.2 header
    path.write_bytes(bytes(raw))
    start = time.perf_counter()
    with pytest.raises(CorruptFileError, match="declares 4294967295 points"):
        read_points(path)
    assert time.perf_counter() - start < 2.0


def _garbage_las(path, variant: str) -> str:
    """Write a small hostile LAS/LAZ file at ``path``; the words its refusal must say."""
    import io as bytes_io

    import laspy

    rng = np.random.default_rng(42)
    if variant == "random":
        path.write_bytes(rng.bytes(404))
        return "no LASF signature"
    if variant == "lasf+random":
        path.write_bytes(b"LASF" + rng.bytes(400))
        return "LAS version"
    version, fmt = ("1.4", 6) if variant.startswith("evlr") else ("1.2", 3)
    las = laspy.create(point_format=fmt, file_version=version)
    las.header.scales = [1e-3] * 3
    las.x, las.y, las.z = rng.uniform(0, 10, (50, 3)).T
    buffer = bytes_io.BytesIO()
    las.write(buffer, do_compress=variant == "chunks")
    data = bytearray(buffer.getvalue())
    if variant == "vlrs":  # 2^31 - 1 VLRs: laspy looped over them
        data[100:104] = struct.pack("<I", 2**31 - 1)
    elif variant == "point-offset":  # the points at 4 GiB: laspy read (and allocated) that
        data[96:100] = struct.pack("<I", 2**32 - 1)
    elif variant == "header-size":
        data[94:96] = struct.pack("<H", 65535)
    elif variant == "evlrs":  # 2^32 - 1 EVLRs from the point data on
        data[235:247] = struct.pack("<QI", 375, 2**32 - 1)
    elif variant == "evlr-length":  # one EVLR of 2^62 bytes at the end
        data[235:247] = struct.pack("<QI", len(data), 1)
        data += b"\0" * 20 + struct.pack("<Q", 2**62) + b"\0" * 32
    elif variant == "chunks":  # a LAZ chunk table declaring 2^32 - 1 chunks
        (table,) = struct.unpack_from("<q", data, struct.unpack_from("<I", data, 96)[0])
        data[table + 4 : table + 8] = struct.pack("<I", 2**32 - 1)
    if variant not in ("evlr-length", "chunks"):  # (a LAZ file's table is at its end)
        data = data[:404] + bytearray(rng.bytes(max(0, 404 - len(data))))
    path.write_bytes(bytes(data))
    return {
        "vlrs": "VLRs, more than",
        "point-offset": "truncated or corrupt",
        "header-size": "truncated or corrupt",
        "evlrs": "EVLRs from byte 375",
        "evlr-length": "EVLR 0 of 1 ends past the end",
        "chunks": "chunk table declares 4294967295 chunks",
    }[variant]


@pytest.mark.parametrize(
    "variant",
    ["random", "lasf+random", "vlrs", "point-offset", "header-size", "evlrs", "evlr-length",
     "chunks"],
)  # fmt: skip
def test_garbage_las_is_refused_at_once_in_one_line(tmp_path, variant):
    """A few hundred bytes of garbage named ``x.las`` (issue #42): refused with exit 2 and one
    line, in well under a second and some 50 MB (measured: 0.20-0.27 s wall, 46 MB peak
    for the whole command). Before, laspy looped over 2^31 declared VLRs or read the declared
    lengths: over 120 s and 2.4-3.6 GB, and a LAZ chunk table of 2^32 chunks aborted the
    process with a Rust out-of-memory backtrace. Bounds here: 10 s, 500 MB."""
    import os
    import subprocess
    import sys
    import time

    pytest.importorskip("laspy")
    path = tmp_path / ("x.laz" if variant == "chunks" else "x.las")
    if variant == "chunks":
        pytest.importorskip("lazrs")
    words = _garbage_las(path, variant)
    ref = tmp_path / "ref.npy"
    np.save(ref, utm_cloud(200))
    env = {**os.environ, "PCREG_NO_SERVER": "1"}
    # Linux keeps a process's peak RSS across fork and exec, so a command started from this
    # (large) test process would report the test process's peak: a small launcher starts it
    # and reports its children's peak (KiB) on stdout
    launcher = (
        "import resource, subprocess, sys\n"
        "rc = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, timeout=10)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.exit(rc)\n"
    )
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", launcher, sys.executable, "-m", "pcreg", "register", str(path),
         str(ref)], env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    elapsed = time.monotonic() - start
    stderr = done.stderr
    assert done.returncode == 2, (elapsed, stderr[-2000:])
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pcreg: error: {path}: "), stderr[-2000:]
    assert words in lines[0] and "MemoryError" not in lines[0]
    assert elapsed < 10
    assert int(done.stdout.split()[-1]) < 500 * 1024  # KiB
