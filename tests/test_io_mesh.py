"""Meshes as point clouds: PLY with faces, OBJ and OFF give their vertices when these cover the
surface densely (the same vertices as Open3D's reader, in any order), else a uniform sample of the
surface, and STL (no shared vertices) is always sampled; the log says which. Files are
written by Open3D here."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from pcreg import io
from pcreg.errors import CorruptFileError
from pcreg.io_formats import mesh as mesh_rule
from pcreg.io_formats import mesh_text

o3d = pytest.importorskip("open3d")

FORMATS = ["ply", "obj", "off"]


@pytest.fixture(autouse=True)
def _silent(capfd):
    """Open3D's readers print; nothing may reach stdout or stderr."""
    yield
    out, err = capfd.readouterr()
    assert out == "" and err == "", (out, err)


def write_mesh(path, mesh) -> None:
    with o3d.utility.VerbosityContextManager(o3d.utility.VerbosityLevel.Error):
        assert o3d.io.write_triangle_mesh(str(path), mesh)


def open3d_vertices(path) -> np.ndarray:
    return np.asarray(o3d.io.read_triangle_mesh(str(path)).vertices)


def dense_sphere():
    """22k vertices on a sphere of radius 1: 2.4 cm apart, 0.7 % of its 3.46 m diagonal."""
    return o3d.geometry.TriangleMesh.create_sphere(radius=1.0, resolution=150)


def box():
    """8 vertices, 12 triangles: far too few to stand for the surface."""
    return o3d.geometry.TriangleMesh.create_box(2.0, 1.0, 0.5)


def _sorted(points: np.ndarray) -> np.ndarray:
    return points[np.lexsort(points.T[::-1])]


def messages(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "pcreg.io"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_dense_mesh_gives_its_vertices(tmp_path, caplog, fmt):
    path = tmp_path / f"sphere.{fmt}"
    write_mesh(path, dense_sphere())
    with caplog.at_level(logging.INFO, logger="pcreg.io"):
        points, info = io.read_points(path, return_info=True)
    # the same vertices (Open3D's OBJ reader orders them by first use in a face)
    np.testing.assert_allclose(_sorted(points), _sorted(open3d_vertices(path)), rtol=0, atol=1e-6)
    assert info.content.startswith("mesh vertices")
    assert any("its vertices are the cloud" in m and str(path) in m for m in messages(caplog))


@pytest.mark.parametrize("fmt", FORMATS)
def test_sparse_mesh_gives_a_surface_sample(tmp_path, caplog, fmt):
    path = tmp_path / f"box.{fmt}"
    write_mesh(path, box())
    with caplog.at_level(logging.WARNING, logger="pcreg.io"):
        points, info = io.read_points(path, return_info=True)
    # area 7 m2, diagonal 2.29 m: a spacing of 0.5 % of it
    count = int(np.ceil(7.0 / (0.005 * np.linalg.norm([2.0, 1.0, 0.5])) ** 2))
    assert len(points) == count
    assert info.content.startswith(f"surface sample of {count} points")
    (note,) = messages(caplog)
    assert str(path) in note and f"uniform sample of {count} surface points" in note
    # every point on a face of the box, and every face sampled in proportion to its area
    extent = np.array([2.0, 1.0, 0.5])
    assert (points >= -1e-9).all() and (points <= extent + 1e-9).all()
    on_face = np.isclose(points, 0, atol=1e-9) | np.isclose(points, extent, atol=1e-9)
    assert on_face.any(axis=1).all()
    share_z = (np.isclose(points[:, 2], 0) | np.isclose(points[:, 2], 0.5)).mean()
    assert abs(share_z - 4.0 / 7.0) < 0.01  # the two 2 x 1 faces hold 4 of the 7 m2
    np.testing.assert_array_equal(io.read_points(path), points)  # reproducible


def test_stl_is_always_sampled(tmp_path, caplog):
    sphere = dense_sphere()
    sphere.compute_triangle_normals()
    path = tmp_path / "sphere.stl"
    write_mesh(path, sphere)
    with caplog.at_level(logging.WARNING, logger="pcreg.io"):
        points, info = io.read_points(path, return_info=True)
    assert len(points) >= mesh_rule.SAMPLE_MIN
    assert "STL has no shared vertices" in info.content
    radius = np.linalg.norm(points, axis=1)
    assert (radius <= 1 + 1e-6).all() and (radius > 0.999).all()  # on the facets
    (note,) = messages(caplog)
    assert str(path) in note and "STL has no shared vertices" in note


def test_the_rule_between_vertices_and_sample():
    """The vertices stand for the surface when sqrt(area / vertices) <= 1 % of the diagonal."""
    coarse = o3d.geometry.TriangleMesh.create_sphere(radius=1.0, resolution=20)  # 382 vertices
    for mesh, sampled in ((dense_sphere(), False), (coarse, True), (box(), True)):
        v, t = np.asarray(mesh.vertices), np.asarray(mesh.triangles)
        raw = mesh_rule.mesh_cloud(mesh_rule.Path("m.obj"), v, t)
        assert raw.content.startswith("surface sample") == sampled


def test_corrupt_meshes_are_refused(tmp_path):
    (tmp_path / "bad.obj").write_text("this is not a mesh\n")
    with pytest.raises(CorruptFileError, match=r"bad\.obj: no vertices \('v' lines\)"):
        io.read_points(tmp_path / "bad.obj")
    write_mesh(tmp_path / "box.off", box())
    text = (tmp_path / "box.off").read_text().splitlines()
    (tmp_path / "cut.off").write_text("\n".join(text[:-3]) + "\n")
    with pytest.raises(CorruptFileError, match=r"cut\.off: "):
        io.read_points(tmp_path / "cut.off")
    sphere = dense_sphere()
    sphere.compute_triangle_normals()
    write_mesh(tmp_path / "s.stl", sphere)
    data = (tmp_path / "s.stl").read_bytes()
    (tmp_path / "cut.stl").write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptFileError, match=r"cut\.stl: binary STL declares \d+ triangles"):
        io.read_points(tmp_path / "cut.stl")


CUBE_V = [(x, y, z) for z in (0.0, 1.0) for y in (0.0, 1.0) for x in (0.0, 1.0)]
#: the unit cube, its bottom as two triangles and its other five sides as quads
CUBE_F = [(1, 3, 4), (1, 4, 2), (5, 6, 8, 7), (1, 2, 6, 5), (2, 4, 8, 6), (4, 3, 7, 8),
          (3, 1, 5, 7)]  # fmt: skip


def _cube_obj(faces=CUBE_F, relative=False) -> str:
    lines = ["# a cube", "o cube", *(f"v {x} {y} {z}" for x, y, z in CUBE_V), "vn 0 0 1"]
    for face in faces:
        corners = [(i - 9 if relative else i) for i in face]  # -1 is the last vertex
        lines.append("f " + " ".join(f"{c}//1" for c in corners))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("relative", [False, True])
def test_obj_quads_are_triangles_and_every_vertex_is_read(tmp_path, relative):
    """An OBJ of quads (Blender's default export): Open3D's reader kept only the 2 triangles
    of a cube with 5 quad sides ("4 vertices and 2 triangles"), so its surface sample lay on
    the bottom alone; the cube is sampled on all six sides now. Negative (relative) indices
    count back from the last vertex."""
    path = tmp_path / "cube.obj"
    path.write_text(_cube_obj(relative=relative))
    points, info = io.read_points(path, return_info=True)
    assert "8 vertices and 12 triangles" in info.content, info.content
    for axis in range(3):  # every side holds about a sixth of the sample
        for side in (0.0, 1.0):
            share = float(np.mean(np.abs(points[:, axis] - side) < 1e-9))
            assert 0.12 < share < 0.22, (axis, side, share)


def test_an_obj_face_may_come_before_its_vertices(tmp_path):
    """Positive indices count into all the file's vertices (readers accept faces first)."""
    (tmp_path / "f.obj").write_text("f 1 2 3\nv 0 0 0\nv 1 0 0\nv 0 1 0\n")
    _, info = io.read_points(tmp_path / "f.obj", return_info=True)
    assert "3 vertices and 1 triangles" in info.content


def test_an_obj_or_off_without_faces_gives_its_vertices(tmp_path):
    """Vertices alone: they are the cloud (Open3D read no vertices: "corrupt or empty")."""
    rng = np.random.default_rng(0)
    cloud = rng.uniform(-1, 1, (500, 3)).round(6)
    (tmp_path / "p.obj").write_text("".join(f"v {x} {y} {z}\n" for x, y, z in cloud))
    off = f"OFF\n{len(cloud)} 0 0\n" + "".join(f"{x} {y} {z}\n" for x, y, z in cloud)
    (tmp_path / "p.off").write_text(off)
    for name in ("p.obj", "p.off"):
        points, info = io.read_points(tmp_path / name, return_info=True)
        np.testing.assert_array_equal(points, cloud)
        assert info.content == "vertices (no faces)"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 4\n",
            "line 4: a face refers to vertex 4, and the file defines 3",
        ),
        ("v 0 0 0\nf 1 -2 -1\nv 1 0 0\n", "line 2: a face refers to vertex -2, and 1 are"),
        ("v 0 0 0\nv 1 0\n", "line 2: a vertex needs x, y and z"),
        ("v 0 0 0\nv 1 0 x\nv 0 1 0\n", "line 2: a vertex is not three numbers"),
        ("v 0 0 0\nv 1 0 0\nf 1 2\n", "line 3: a face needs 3 corners"),
        # said 'vertex 9223372036854775807' (numpy clamps the index)
        (
            "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 99999999999999999999\n",
            "line 4: a face refers to vertex 99999999999999999999, past any file's vertices",
        ),
        (  # 19 digits within int64: 'its faces are not indices' (the review)
            "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 1000000000000000000\n",
            "line 4: a face refers to vertex 1000000000000000000, and the file defines 3",
        ),
    ],
)
def test_a_broken_obj_names_its_line(tmp_path, text, said):
    (tmp_path / "b.obj").write_text(text)
    with pytest.raises(CorruptFileError, match=said):
        io.read_points(tmp_path / "b.obj")


def test_off_polygons_and_counts(tmp_path):
    """An OFF of quads with its counts on the header's line is read like the OBJ cube; fewer
    lines than the counts declare is truncated."""
    body = [f"{x} {y} {z}" for x, y, z in CUBE_V]
    body += [f"{len(f)} " + " ".join(str(i - 1) for i in f) + " 255 0 0" for f in CUBE_F]
    (tmp_path / "c.off").write_text(f"COFF {len(CUBE_V)} {len(CUBE_F)} 0\n" + "\n".join(body))
    assert (
        "8 vertices and 12 triangles"
        in io.read_points(tmp_path / "c.off", return_info=True)[1].content
    )
    off = mesh_text.read_off(tmp_path / "c.off", (tmp_path / "c.off").read_bytes())
    obj = mesh_text.read_obj(tmp_path / "c.obj", _cube_obj().encode())
    np.testing.assert_array_equal(off[0], obj[0])
    np.testing.assert_array_equal(off[1], obj[1])  # the same triangles, fanned alike
    (tmp_path / "t.off").write_text(f"OFF\n{len(CUBE_V)} {len(CUBE_F)} 0\n" + "\n".join(body[:-2]))
    with pytest.raises(CorruptFileError, match="the file holds 8 and 5: truncated"):
        io.read_points(tmp_path / "t.off")


def test_off_of_geomview_kinds_and_utf16_text(tmp_path):
    """Geomview's nOFF gives the vertices' dimension first: 3-D is read (it was refused as 'no
    vertex and face counts'), others and 4OFF are refused by name; a UTF-16 file says so (an
    OBJ read as 'no vertices', an OFF as 'its first word is not OFF')."""
    tri = "0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n"
    (tmp_path / "n.off").write_text("nOFF\n3\n3 1 0\n" + tri)
    (tmp_path / "o.off").write_text("OFF 3 1 0\n" + tri)
    for name in ("n.off", "o.off"):
        v, t = mesh_text.read_off(tmp_path / name, (tmp_path / name).read_bytes())
        np.testing.assert_array_equal(v, [[0, 0, 0], [1, 0, 0], [0, 1, 0]])
        np.testing.assert_array_equal(t, [[0, 1, 2]])
    (tmp_path / "2.off").write_text("nOFF 2\n3 1 0\n0 0\n1 0\n0 1\n3 0 1 2\n")
    # a count line without the face count: its next line, a vertex, was read as counts
    (tmp_path / "c.off").write_text("OFF\n3\n" + tri)
    (tmp_path / "4.off").write_text("4OFF\n3 1 0\n0 0 0 1\n1 0 0 1\n0 1 0 1\n3 0 1 2\n")
    (tmp_path / "u.off").write_bytes(("OFF 3 1 0\n" + tri).encode("utf-16"))
    (tmp_path / "u.obj").write_bytes("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n".encode("utf-16"))
    (tmp_path / "u.xyz").write_bytes("1 2 3\n4 5 6\n".encode("utf-16"))
    for name, said in [
        ("2.off", "nOFF of 2-D vertices: only 3-D are read"),
        ("c.off", "line 2: the vertex count without the face count"),
        ("4.off", "4OFF: homogeneous 4-D vertices are not read"),
        ("u.off", "UTF-16 text: save it as UTF-8"),
        ("u.obj", "UTF-16 text: save it as UTF-8"),
        ("u.xyz", "UTF-16 text: save it as UTF-8"),
    ]:
        with pytest.raises(CorruptFileError, match=said):
            io.read_points(tmp_path / name)


@pytest.mark.parametrize(
    "text",
    [
        "\ufeffv 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n",  # a byte-order mark (lost the first vertex)
        "v 0 0 0 1.0\nv 1 0 0 1.0\nv 0 1 0 1.0\nf 1 2 3\n",  # a w after x, y, z
        "v 0 0 0 1 0 0\nv 1 0 0 0 1 0\nv 0 1 0 0 0 1\nf 1/1/1 2/2/2 3/3/3\n",  # colours
        "  v 0 0 0\n\tv 1 0 0 # a comment\nv\t0 1 0\r\nf -3 -2 -1\n",  # indents, tabs, CRLF
        "v 0 0 0\rv 1 0 0\rv 0 1 0\rf 1 2 3\r",  # old Mac line ends (read as one vertex)
        "v 0 0 0\r\nv 1 0 0\rv 0 1 0\r\nf 1 2 3\r\n",  # one lone CR among CRLF (refused)
        "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 \\\n 3\n",  # a backslash continues the line
    ],
)
def test_obj_lines_as_writers_write_them(tmp_path, text):
    (tmp_path / "t.obj").write_text(text, encoding="utf-8")
    vertices, triangles = mesh_text.read_obj(tmp_path / "t.obj", (tmp_path / "t.obj").read_bytes())
    np.testing.assert_array_equal(vertices, [[0, 0, 0], [1, 0, 0], [0, 1, 0]])
    np.testing.assert_array_equal(triangles, [[0, 1, 2]])


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("v 0 0 0\nv 1_0 0 0\nv 0 1 0\n", "line 2: a vertex is not three numbers"),  # not 10
        # nine values on three lines: the bulk reader took them three by three
        ("v 1 2 3 1\nv 4 5\nv 7 8 9\n", "line 2: a vertex needs x, y and z"),
    ],
)
def test_an_obj_vertex_that_is_not_three_numbers_is_refused(tmp_path, text, said):
    (tmp_path / "u.obj").write_text(text)
    with pytest.raises(CorruptFileError, match=said):
        io.read_points(tmp_path / "u.obj")


def test_a_regular_obj_is_read_in_bulk_alike(tmp_path):
    """The bulk reader of a regular file (colours after x y z, triangles and quads) gives
    what the line-by-line one gives (a negative index at the end sends the same file there)."""
    rng = np.random.default_rng(0)
    v = rng.uniform(-1, 1, (300, 3)).round(5)
    text = "".join(f"v {a} {b} {c} 0.5 0.5 0.5\n" for a, b, c in v)
    for k, face in enumerate(rng.integers(1, 301, (500, 4))):
        text += "f " + " ".join(f"{i}/{i}/{i}" for i in face[: 3 + k % 2]) + "\n"
    data = text.encode()
    fast = mesh_text._obj_fast(data)
    assert fast is not None and len(fast[1]) == 750
    slow = mesh_text.read_obj(tmp_path / "x.obj", data + b"f 1 2 -1\n")
    np.testing.assert_array_equal(fast[0], v)
    np.testing.assert_array_equal(fast[0], slow[0])
    np.testing.assert_array_equal(fast[1], slow[1][:-1])
    np.testing.assert_array_equal(slow[1][-1], [0, 1, 299])
