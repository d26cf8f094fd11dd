"""pcreg.io: every format round-trips; every error class names the file."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

from pcreg import io
from pcreg.errors import (
    CorruptFileError,
    EmptyCloudError,
    InputError,
    MissingFileError,
    NonFiniteError,
    NonRigidTransformError,
    OutputExistsError,
    ShapeError,
    UnknownFormatError,
    UnwritableOutputError,
)


@pytest.fixture
def cloud(rng) -> np.ndarray:
    return (rng.random((257, 3)) * 10 - 5).astype(np.float32)


def raises_naming(exc_type, path):
    """pytest.raises that also checks the message starts with the file path."""

    class _Ctx:
        def __enter__(self):
            self.ctx = pytest.raises(exc_type)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            out = self.ctx.__exit__(*exc)
            assert isinstance(self.info.value, InputError)
            assert str(self.info.value).startswith(f"{path}: "), str(self.info.value)
            return out

    return _Ctx()


def test_read_write_roundtrip_ply_npy(tmp_path, cloud):
    for name in ("c.ply", "c.npy"):
        path = io.write_points(tmp_path / name, cloud)
        back = io.read_points(path)
        assert back.dtype == np.float64
        np.testing.assert_array_equal(back, cloud)


def test_read_text_formats(tmp_path, cloud):
    (tmp_path / "c.xyz").write_text("\n".join(" ".join(map(str, p)) for p in cloud.tolist()))
    (tmp_path / "c.csv").write_text(
        "x,y,z\n" + "\n".join(",".join(map(str, p)) for p in cloud.tolist())
    )
    (tmp_path / "c.txt").write_text(
        "# comment\n" + "\n".join(" ".join(map(str, [*p, 7])) for p in cloud.tolist())
    )
    for name in ("c.xyz", "c.csv", "c.txt"):
        np.testing.assert_allclose(io.read_points(tmp_path / name), cloud, rtol=1e-6)


def test_read_text_trailing_comments_bom_and_line_numbers(tmp_path, cloud):
    """A ``#`` after the values is a comment, on the first row too (it was taken for a header
    and the point dropped); a byte-order mark is not a value; errors name the file's line."""
    rows = [" ".join(map(str, p)) for p in cloud.tolist()]
    text = "\n".join(f"{r}  # point {i}" if i % 3 == 0 else r for i, r in enumerate(rows))
    (tmp_path / "c.txt").write_text(text)
    np.testing.assert_allclose(io.read_points(tmp_path / "c.txt"), cloud, rtol=1e-6)
    (tmp_path / "b.csv").write_bytes(b"\xef\xbb\xbf" + "\n".join(rows).encode())
    np.testing.assert_allclose(io.read_points(tmp_path / "b.csv"), cloud, rtol=1e-6)
    (tmp_path / "bad.txt").write_text("# head\n\n1 2 3\n4 5 6\n7 x 9\n")
    with pytest.raises(CorruptFileError, match="line 5: non-numeric"):
        io.read_points(tmp_path / "bad.txt")


def test_a_text_line_too_long_for_a_row_is_refused_before_it_is_read_whole(tmp_path, cloud):
    """A text file of one endless line (a hostile run: 30 million numbers on one line took
    1.5 GiB and 4.4 s to refuse) is refused at its first MiB, naming the line; rows of any
    ordinary length up to the limit are read as ever."""
    import tracemalloc

    from pcreg.io_formats.text import MAX_LINE, read_text

    (tmp_path / "one.xyz").write_text("1 2 3\n" + "1 " * (3 * MAX_LINE))
    tracemalloc.start()
    with pytest.raises(CorruptFileError, match="line 2 is longer than 1,048,576 characters"):
        io.read_points(tmp_path / "one.xyz")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 40 * MAX_LINE, peak  # a few copies of one MiB, not the 6 MiB line's words
    width = (MAX_LINE - 1) // 12  # values of 11 characters and a space: a row just under
    row = " ".join(["1.000000001"] * width)
    (tmp_path / "wide.xyz").write_text(f"{row}\n{row}\n")
    assert read_text(tmp_path / "wide.xyz").shape == (2, width)  # read, then told its shape
    longest = "1 " * (MAX_LINE // 2 - 1) + "1" * 2  # exactly MAX_LINE characters, then "\n"
    assert len(longest) == MAX_LINE
    (tmp_path / "edge.xyz").write_text(f"{longest}\n{longest}\n")
    assert read_text(tmp_path / "edge.xyz").shape == (2, MAX_LINE // 2)
    (tmp_path / "over.xyz").write_text(f"{longest}1\n")
    with pytest.raises(CorruptFileError, match="line 1 is longer than"):
        read_text(tmp_path / "over.xyz")


def test_read_kitti_bin_npz_pcd_las(tmp_path, cloud):
    xyzi = np.hstack([cloud, np.ones((len(cloud), 1), np.float32)])
    xyzi.tofile(tmp_path / "scan.bin")
    np.testing.assert_array_equal(io.read_points(tmp_path / "scan.bin"), cloud)
    np.savez(tmp_path / "c.npz", points=cloud, other=np.zeros(3))
    np.testing.assert_array_equal(io.read_points(tmp_path / "c.npz"), cloud)
    header = (
        "# .PCD v0.7\nVERSION 0.7\nFIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\n"
        f"WIDTH {len(cloud)}\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS {len(cloud)}\nDATA ascii\n"
    )
    (tmp_path / "c.pcd").write_text(
        header + "\n".join(" ".join(map(str, p)) for p in cloud.tolist())
    )
    np.testing.assert_allclose(io.read_points(tmp_path / "c.pcd"), cloud, rtol=1e-6)
    import laspy

    las = laspy.create(point_format=3, file_version="1.2")
    las.header.scales = [1e-4, 1e-4, 1e-4]
    las.header.offsets = [0.0, 0.0, 0.0]
    las.x, las.y, las.z = cloud[:, 0], cloud[:, 1], cloud[:, 2]
    for name in ("c.las", "c.laz"):
        las.write(tmp_path / name)
        np.testing.assert_allclose(io.read_points(tmp_path / name), cloud, atol=1e-4)


@pytest.mark.data
def test_reads_real_kitti_scan(shared_data):
    path = shared_data / "kitti00_scancontext/000094.bin"
    pts = io.read_points(path)
    assert pts.shape == (1945888 // 16, 3) and pts.dtype == np.float64
    raw = np.fromfile(path, np.float32).reshape(-1, 4)[:, :3]
    np.testing.assert_array_equal(pts, raw)  # float32 values convert exactly
    assert 50 < np.abs(pts[:, :2]).max() < 130  # HDL-64 range, metres


def test_a_broken_symbolic_link_says_what_is_wrong_with_it(tmp_path):
    """A link to a missing file names its target, and links that point at each other say
    they loop (both were "file not found", which sent a user looking for the link itself)."""
    (tmp_path / "a.ply").symlink_to("b.ply")
    (tmp_path / "b.ply").symlink_to("a.ply")
    (tmp_path / "gone.ply").symlink_to("link.ply")  # a chain: the missing file is the last
    (tmp_path / "link.ply").symlink_to("nowhere.ply")
    with pytest.raises(MissingFileError, match=r"a\.ply: a symbolic link that loops"):
        io.read_points(tmp_path / "a.ply")
    end = str((tmp_path / "nowhere.ply").resolve())
    with pytest.raises(MissingFileError, match=re.escape(f"to a missing file ({end})")):
        io.read_points(tmp_path / "gone.ply")


def test_missing_file(tmp_path):
    with raises_naming(MissingFileError, tmp_path / "nope.ply"):
        io.read_points(tmp_path / "nope.ply")
    with raises_naming(MissingFileError, tmp_path / "nope.txt"):
        io.read_transform(tmp_path / "nope.txt")
    d = tmp_path / "dir.ply"
    d.mkdir()
    with raises_naming(MissingFileError, d):
        io.read_points(d)
    bare = tmp_path / "scans"  # a directory without a cloud's extension: says so
    bare.mkdir()
    with pytest.raises(UnknownFormatError, match="is a directory, not a point cloud file"):
        io.read_points(bare)


def test_unknown_extension(tmp_path):
    p = tmp_path / "cloud.vtk"
    p.write_text("v 0 0 0\n")
    with raises_naming(UnknownFormatError, p):
        io.read_points(p)
    with raises_naming(UnknownFormatError, tmp_path / "out.xyz"):
        io.write_points(tmp_path / "out.xyz", np.zeros((3, 3)))
    with raises_naming(UnknownFormatError, tmp_path / "t.yaml"):
        io.write_transform(tmp_path / "t.yaml", np.eye(4))


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("bad.ply", b"this is not a ply file\n"),
        (
            "bad.ply",
            b"ply\nformat binary_little_endian 1.0\nelement vertex 100\nproperty float x\n",
        ),
        ("bad.pcd", b"\x00\x01garbage"),
        ("bad.npy", b"\x93NUMPY garbage"),
        ("bad.npz", b"PK not really a zip"),
        ("bad.bin", b"123456789"),
        ("bad.xyz", b"1 2 3\n4 five 6\n"),
        ("bad.xyz", b"1 2 3\n4 5\n"),
        ("bad.txt", b"\xff\xfe\x00binary"),
        ("bad.las", b"LASF but truncated"),
        ("empty.ply", b""),
    ],
)
def test_corrupt_files(tmp_path, name, content):
    p = tmp_path / name
    p.write_bytes(content)
    with raises_naming(CorruptFileError, p):
        io.read_points(p)


def test_empty_clouds(tmp_path):
    np.save(tmp_path / "e.npy", np.zeros((0, 3), np.float32))
    (tmp_path / "e.bin").write_bytes(b"")
    (tmp_path / "e.xyz").write_text("# only a comment\n")
    for name in ("e.npy", "e.bin", "e.xyz"):
        with raises_naming(EmptyCloudError, tmp_path / name):
            io.read_points(tmp_path / name)


def test_nan_inf_error_or_drop(tmp_path, cloud, caplog):
    bad = cloud.copy()
    bad[3, 1] = np.nan
    bad[10, 0] = np.inf
    np.save(tmp_path / "n.npy", bad)
    with raises_naming(NonFiniteError, tmp_path / "n.npy") as info:
        io.read_points(tmp_path / "n.npy", nan_policy="error")
    assert "2 of 257" in str(info.value)
    kept = io.read_points(tmp_path / "n.npy")  # dropping is the default
    assert kept.shape == (255, 3) and np.isfinite(kept).all()
    assert "dropped 2 of 257" in caplog.text
    np.save(tmp_path / "all_nan.npy", np.full((4, 3), np.nan, np.float32))
    with raises_naming(EmptyCloudError, tmp_path / "all_nan.npy"):
        io.read_points(tmp_path / "all_nan.npy", nan_policy="drop")


def test_wrong_shape(tmp_path):
    np.save(tmp_path / "flat.npy", np.zeros(12, np.float32))
    np.save(tmp_path / "two.npy", np.zeros((5, 2), np.float32))
    np.savez(tmp_path / "keys.npz", a=np.zeros((3, 3)), b=np.zeros((3, 3)))
    np.save(tmp_path / "str.npy", np.array([["a", "b", "c"]]))
    for name in ("flat.npy", "two.npy", "keys.npz", "str.npy"):
        with raises_naming(ShapeError, tmp_path / name):
            io.read_points(tmp_path / name)
    # x, y, z as rows: said so, not "too few points: 3 given" later
    np.save(tmp_path / "rows.npy", np.zeros((3, 500), np.float32))
    with pytest.raises(ShapeError, match=r"got shape \(3, 500\): transposed"):
        io.read_points(tmp_path / "rows.npy")


def test_transform_roundtrip_all_formats(tmp_path, gen):
    from pcreg.geometry import random_transform

    t = random_transform(gen, max_translation=3.0, dtype=__import__("torch").float64).numpy()
    for name in ("t.txt", "t.npy", "t.json"):
        io.write_transform(tmp_path / name, t)
        np.testing.assert_array_equal(io.read_transform(tmp_path / name), t)
    (tmp_path / "kitti.txt").write_text(" ".join(map(str, t[:3].ravel())))
    np.testing.assert_allclose(io.read_transform(tmp_path / "kitti.txt"), t)
    (tmp_path / "obj.json").write_text(json.dumps({"transform": t.tolist(), "note": "x"}))
    np.testing.assert_array_equal(io.read_transform(tmp_path / "obj.json"), t)


@pytest.mark.parametrize(
    ("matrix", "exc", "words"),
    [
        (np.diag([2.0, 2.0, 2.0, 1.0]), NonRigidTransformError, "not orthonormal"),
        (np.diag([1.0, 1.0, -1.0, 1.0]), NonRigidTransformError, "reflection"),
        (
            np.array([[1, 0.1, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]]),
            NonRigidTransformError,
            "shear",
        ),
        (np.vstack([np.eye(4)[:3], [1.0, 0, 0, 1]]), NonRigidTransformError, "bottom row"),
        (np.eye(3), ShapeError, "4x4 (or 3x4) transform, got 9 numbers"),
        (np.full((4, 4), np.nan), NonFiniteError, "NaN"),
    ],
)
def test_non_rigid_and_malformed_transforms(tmp_path, matrix, exc, words):
    p = tmp_path / "t.txt"
    p.write_text("\n".join(" ".join(map(str, row)) for row in np.atleast_2d(matrix)))
    with raises_naming(exc, p) as info:
        io.read_transform(p)
    assert words in str(info.value)


def test_accepts_3dmatch_like_rounding(tmp_path):
    t = np.eye(4)
    t[:3, :3] *= 1.0006  # det within [0.9993, 1.0006] like gt.log
    np.save(tmp_path / "t.npy", t)
    np.testing.assert_array_equal(io.read_transform(tmp_path / "t.npy"), t)


def test_corrupt_transform_files(tmp_path):
    (tmp_path / "t.json").write_text("{not json")
    (tmp_path / "t.txt").write_text("1 2 three")
    for name in ("t.json", "t.txt"):
        with raises_naming(CorruptFileError, tmp_path / name):
            io.read_transform(tmp_path / name)


def test_outputs_are_never_silently_overwritten(tmp_path, cloud):
    p = io.write_points(tmp_path / "c.npy", cloud)
    before = p.read_bytes()
    with raises_naming(OutputExistsError, p):
        io.write_points(p, cloud[:10])
    assert p.read_bytes() == before
    io.write_points(p, cloud[:10], overwrite=True)
    assert io.read_points(p).shape == (10, 3)
    assert [f.name for f in tmp_path.iterdir()] == ["c.npy"]  # no temporary files left
    umask = os.umask(0)
    os.umask(umask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


def test_unwritable_output(tmp_path, cloud):
    with raises_naming(UnwritableOutputError, tmp_path / "missing" / "c.npy"):
        io.write_points(tmp_path / "missing" / "c.npy", cloud)
    if os.geteuid() != 0:  # root ignores directory permissions
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with raises_naming(UnwritableOutputError, ro / "c.npy"):
            io.write_points(ro / "c.npy", cloud)


def test_failed_write_leaves_no_partial_file(tmp_path, monkeypatch, cloud):
    target = tmp_path / "c.npy"

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(np, "save", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        io.write_points(target, cloud)
    assert list(tmp_path.iterdir()) == []


def test_read_refuses_a_file_over_the_memory_cap(tmp_path):
    path = tmp_path / "big.npy"
    np.save(path, np.zeros((1000, 3)))
    with pytest.raises(ValueError, match=r"big.npy: too large to read under the memory cap"):
        io.read_points(path, max_memory=10_000)  # 24 kB of float64 needs ~72 kB
    assert io.read_points(path, max_memory=100_000).shape == (1000, 3)


def test_a_deflated_npz_is_charged_for_what_it_unpacks_to(tmp_path):
    """1.4 MB of deflated zeros can declare 1.4 GB (a hostile run's 'bomb' took 4.3 GB and
    never finished): the array's header is read, and the cap applied, before it is unpacked."""
    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, pts=np.zeros((200_000, 3)))  # 4.8 MB of data, ~5 kB of file
    assert path.stat().st_size < 50_000
    unpacked = []
    real_load = np.load
    monkey = pytest.MonkeyPatch()
    monkey.setattr(np, "load", lambda *a, **k: unpacked.append(a) or real_load(*a, **k))
    try:
        with pytest.raises(
            ValueError,
            match=r"bomb.npz: too large to read under the memory "
            r"cap: its .npz 'pts' array declares shape \(200000, 3\)",
        ):
            io.read_points(path, max_memory=10_000_000)
    finally:
        monkey.undo()
    assert unpacked == []  # refused from the header alone
    assert io.read_points(path, max_memory=20_000_000).shape == (200_000, 3)


def test_an_npy_whose_header_declares_more_than_the_file_holds_is_truncated(tmp_path):
    """A header that declares 480 MB over 240 bytes of data: refused as truncated before
    numpy allocates the 480 MB (it did, then failed to fill them)."""
    import io as stdio

    head = stdio.BytesIO()
    np.lib.format.write_array_header_1_0(
        head, {"descr": "<f8", "fortran_order": False, "shape": (20_000_000, 3)}
    )
    path = tmp_path / "lie.npy"
    path.write_bytes(head.getvalue() + np.zeros((10, 3)).tobytes())
    for cap in (None, 2000):  # truncated, not "too large": a larger cap would not help
        with pytest.raises(
            ValueError,
            match=r"lie.npy: truncated: its header declares shape "
            r"\(20000000, 3\) \(480000000 bytes of data\), the file holds 240",
        ):
            io.read_points(path, max_memory=cap)


def test_an_array_of_pickled_objects_is_not_called_truncated(tmp_path):
    path = tmp_path / "objects.npy"
    np.save(path, np.array([[object()] * 3] * 200, dtype=object), allow_pickle=True)
    with pytest.raises(
        ValueError, match=r"objects.npy: not a plain numeric .npy array \(pickled objects\)"
    ):
        io.read_points(path)


def test_an_npz_member_not_named_npy_is_read(tmp_path):
    import zipfile

    body = tmp_path / "x.npy"
    np.save(body, np.arange(30.0).reshape(10, 3))
    path = tmp_path / "odd.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.write(body, "cloud")  # no .npy suffix inside
    np.testing.assert_array_equal(io.read_points(path), np.arange(30.0).reshape(10, 3))


def test_float32_at_utm_offsets_is_refused(tmp_path, rng):
    room = rng.uniform(0, 4, (2000, 3))
    path = tmp_path / "utm32.npy"
    utm = room + np.array([5e5, 4.2e6, 0.0])
    np.save(path, utm.astype(np.float32))  # 0.5 m steps for a 4 m room
    with pytest.raises(ValueError, match=r"utm32.npy: float32 coordinates .* too coarse"):
        io.read_points(path)
    np.save(path, utm)
    assert io.read_points(path).shape == (2000, 3)
    np.save(path, room.astype(np.float32))  # float32 near the origin is fine
    assert io.read_points(path).shape == (2000, 3)


def test_drop_nonfinite_all_nan_is_one_error(tmp_path, caplog):
    path = tmp_path / "nan.npy"
    np.save(path, np.full((10, 3), np.nan))
    with pytest.raises(ValueError, match="no valid points: all 10 are invalid"):
        io.read_points(path, nan_policy="drop")
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_transform_with_an_absurd_translation_is_refused():
    t = np.eye(4)
    t[0, 3] = 1e300
    with pytest.raises(ValueError, match="translation of 1e\\+300 m is beyond"):
        io.validate_transform(t)
    t[0, 3] = 4.2e6  # a UTM offset is fine
    assert io.validate_transform(t)[0, 3] == 4.2e6


@pytest.mark.parametrize(
    ("header", "row"),
    [
        ("z,x,y", "{z},{x},{y}"),  # columns in another order: read by name
        ("intensity,x,y,z", "7,{x},{y},{z}"),
        (",x,y,z", "{i},{x},{y},{z}"),  # pandas' index column
        ("//X,Y,Z,R,G,B", "{x},{y},{z},1,2,3"),  # CloudCompare
        ("X[m] Y[m] Z[m]", "{x} {y} {z}"),
        ("# Y X Z", "{y} {x} {z}"),  # a commented header
        ('"x";"y";"z"', "{x};{y};{z}"),
        ("Easting Northing Elevation", "{x} {y} {z}"),
        ("a,b,c", "{x},{y},{z}"),  # names that are not coordinates: the first three
        ("", "{xc} {yc} {zc}"),  # decimal commas
        ("x;y;z", "{xc};{yc};{zc}"),
        ("", "{xc} {yc} {zc} 255 0 7"),  # decimal commas beside whole numbers (colours)
        ("# image 640 x 480", "{x} {y} {z}"),  # a comment, not a header
        ("# axis x up\nx y z", "{x} {y} {z}"),  # a comment, then the header
        ("# format: X Y Z R G B", "{x} {y} {z} 1 2 3"),  # prose: a comment, not the header
        ("x (m),y (m),z (m)", "{x},{y},{z}"),
        ("X [m] Y [m] Z [m]", "{x} {y} {z}"),
        ("", '"{x}","{y}","{z}"'),  # quoted values (pandas' QUOTE_ALL)
    ],
)
def test_a_text_header_picks_the_named_columns(tmp_path, cloud, header, row):
    """A header that names x, y, z is read by name (before, the first three columns were
    taken whatever it said: 'z,x,y' registered 119 deg off with exit 0), and decimal
    commas are decimals (they were taken for separators)."""
    lines = [header] if header else []
    for i, (x, y, z) in enumerate(cloud.tolist()):
        xc, yc, zc = (f"{v:.6f}".replace(".", ",") for v in (x, y, z))
        lines.append(row.format(i=i, x=x, y=y, z=z, xc=xc, yc=yc, zc=zc))
    (tmp_path / "c.csv").write_text("\n".join(lines) + "\n")
    np.testing.assert_allclose(io.read_points(tmp_path / "c.csv"), cloud, atol=1e-6)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("lon,lat,h\n1,2,3\n4,5,6\n", "names no column x, y: which columns"),
        ("a,b,x,y,z\n1,2,3\n4,5,6\n", "names 5 columns, its rows hold 3"),
        (
            "1,234 2,345 3,456\n4,567 5,678 6,789\n",
            "line 1: .* every comma in the file may be a decimal comma or a thousands separator",
        ),
        ("1 2 3\n4 5 6\n7 8\n", "line 3: 2 values, where the rows before have 3"),
        # every row read as 6 columns (x = 1, y = 234.5, z = 2) before, exit 0
        (
            "1,234.5 2,345.6 3,456.7\n1,234.5 2,345.6 4,456.7\n",
            "line 1: '1,234.5' mixes decimal points and decimal commas .* thousands separator",
        ),
        ("1 2 3\n2,345.6 1 2\n", "line 2: '2,345.6' mixes decimal points and decimal commas"),
        # hostile runs: each read wrong with exit 0 before
        ('"1,234.5","2","3"\n"1,5","2","3"\n', "line 1: '1,234.5' mixes decimal points"),
        ("1.234,5 2,5 3,5\n4,5 5,5 6,5\n", "line 1: '1.234,5' mixes decimal points"),
        ("1.234,5;2,5;3,5\n4,5;5,5;6,5\n", "line 1: '1.234,5' mixes decimal points"),
        ("0,5 1.5 2,5\n1,5 2.5 3,5\n", "line 1: '1.5' mixes decimal points"),
        ("1,2,,4\n5,6,,8\n", "line 1: '1,2,,4': an empty value between commas"),
        ("1;2;;4\n5;6;;8\n", "line 1: '1;2;;4': an empty value between semicolons"),
        ("1.5.0 2 3\n4 5 6\n", "line 1: non-numeric value"),  # was dropped as a header
        ("0x10 2 3\n4 5 6\n", "line 1: non-numeric value"),
        ("1_000 2 3\n4 5 6\n", "line 1: '1_000': an underscore in a number"),
        (",5 ,25 ,125\n", "line 1: ',5 ,25 ,125' starts with a comma: an empty first value"),
        ("1 2 3\n0,5 1.5 2,5\n", "line 2: '1.5' mixes decimal points"),
    ],
)
def test_a_text_header_that_leaves_the_coordinates_unclear_is_refused(tmp_path, text, said):
    (tmp_path / "c.csv").write_text(text)
    with pytest.raises(CorruptFileError, match=said):
        io.read_points(tmp_path / "c.csv")


def test_a_bin_of_other_records_is_refused_and_nuscenes_is_read(tmp_path, cloud):
    """A nuScenes LiDAR scan (5 float32 a point) whose size is also a multiple of 16 was read
    as KITTI's 4 values a point: 80 % of the points garbage, exit 0. Its intensities are then
    mostly coordinates, many negative: refused; named ``.pcd.bin`` it is read as nuScenes'."""
    n = len(cloud) // 4 * 4  # 20 * n bytes: a multiple of 16 too
    rng = np.random.default_rng(0)
    records = np.hstack(
        [cloud[:n] - cloud[:n].mean(0), rng.uniform(0, 255, (n, 1)), rng.integers(0, 32, (n, 1))]
    ).astype(np.float32)
    records.tofile(tmp_path / "scan.bin")
    with pytest.raises(
        CorruptFileError,
        match=r"intensities are negative: other records \(float64 values, or a nuScenes",
    ):
        io.read_points(tmp_path / "scan.bin")
    records.tofile(tmp_path / "scan.pcd.bin")
    np.testing.assert_array_equal(io.read_points(tmp_path / "scan.pcd.bin"), records[:, :3])
    (tmp_path / "cut.pcd.bin").write_bytes(records.tobytes()[:-4])
    with pytest.raises(CorruptFileError, match="not a multiple of 20: not a nuScenes"):
        io.read_points(tmp_path / "cut.pcd.bin")


@pytest.mark.parametrize(
    ("text", "points"),
    [
        # a comma-separated row is one word, not a thousands separator (refused in between)
        ("100,200,300.5\n101,201,301.5\n", [[100, 200, 300.5], [101, 201, 301.5]]),
        ("1 ,2 ,3\n4 ,5 ,6\n", [[1, 2, 3], [4, 5, 6]]),  # read 0.2, 0.3 and 0.5, 0.6
        ('"1,5","2,5","3,5"\n"1","2","3"\n', [[1.5, 2.5, 3.5], [1, 2, 3]]),  # 6 columns
        ('"x";"y";"z"\n"1,5";"2,5";"3,5"\n', [[1.5, 2.5, 3.5]]),
        ("x,y,T (\u00b0C)\n1,2,3\n", None),  # refused: a header names no z
        ("1.5;2.5;3.5\n4,5;5;6\n", [[1.5, 2.5, 3.5], [4.5, 5, 6]]),
    ],
)
def test_text_rows_as_writers_write_them(tmp_path, text, points):
    (tmp_path / "c.csv").write_text(text)
    if points is None:
        with pytest.raises(CorruptFileError, match="names no column z"):
            io.read_points(tmp_path / "c.csv")
        return
    np.testing.assert_array_equal(io.read_points(tmp_path / "c.csv"), points)


def test_a_latin1_header_and_utf16_without_a_mark(tmp_path):
    """'T (\u00b0C)' in Latin-1 was 'not a text file (invalid UTF-8)'; UTF-16 without a
    byte-order mark read as non-numeric values."""
    (tmp_path / "l.xyz").write_bytes("x y z T (\u00b0C)\n1 2 3 20\n".encode("latin-1"))
    np.testing.assert_array_equal(io.read_points(tmp_path / "l.xyz"), [[1, 2, 3]])
    (tmp_path / "u.xyz").write_bytes("1 2 3\n4 5 6\n".encode("utf-16-le"))
    with pytest.raises(CorruptFileError, match="NUL bytes: UTF-16 or UTF-32 text"):
        io.read_points(tmp_path / "u.xyz")


def test_decimal_commas_after_rows_without_a_comma_are_decimals(tmp_path):
    """The mode was decided on the first row: '1 2 3' then '0,5 1,5 2,5' was refused as a row
    of 6 values."""
    (tmp_path / "c.xyz").write_text("1 2 3\n0,5 1,5 2,5\n2 1 0,5\n")
    np.testing.assert_array_equal(
        io.read_points(tmp_path / "c.xyz"), [[1, 2, 3], [0.5, 1.5, 2.5], [2, 1, 0.5]]
    )
    (tmp_path / "c.csv").write_text("1,2,3\n4,5,6\n")  # a comma-separated file stays one
    np.testing.assert_array_equal(io.read_points(tmp_path / "c.csv"), [[1, 2, 3], [4, 5, 6]])
    (tmp_path / "d.csv").write_text("1,2,3\n0,5 1,5 2,5\n")  # a comma before: no switch
    with pytest.raises(CorruptFileError, match="line 2: 6 values, where the rows before have 3"):
        io.read_points(tmp_path / "d.csv")


def test_decimal_commas_of_three_digits_are_settled_by_the_rest_of_the_file(tmp_path):
    """'1,500 2,250 3,125' alone could be thousands; a later '0,042' settles it."""
    (tmp_path / "c.xyz").write_text("1,500 2,250 3,125\n0,042 1,5 2,0\n")
    np.testing.assert_array_equal(
        io.read_points(tmp_path / "c.xyz"), [[1.5, 2.25, 3.125], [0.042, 1.5, 2.0]]
    )
