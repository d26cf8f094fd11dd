"""Triangle meshes (PLY with faces, OBJ, OFF, STL) as point clouds: their vertices, or a
uniform sample of their surface when the vertices are too sparse to stand for it.

The rule (:func:`mesh_cloud`): the vertices are the cloud when they cover the surface densely,
i.e. when the side of the square each vertex stands for, ``sqrt(area / vertices)``, is at most
:data:`DENSE_SPACING` (1 %) of the mesh's bounding-box diagonal: a scanned or fused mesh (the
Stanford bunny: 0.6 %; 3DMatch's fused fragments). Otherwise (a CAD model, a box of 8
vertices, a low-poly sphere) the surface is sampled uniformly by area, with a spacing of
:data:`SAMPLE_SPACING` (0.5 %) of the diagonal, between :data:`SAMPLE_MIN` and
:data:`SAMPLE_MAX` points, from a fixed seed (the same file gives the same points). STL stores
each triangle's corners apart, with no shared vertices: its surface is always sampled.

OBJ and OFF are parsed by pcreg (:mod:`pcreg.io_formats.mesh_text`: every vertex, polygons
fanned into triangles; Open3D's reader dropped quads and read no vertices from a file without
faces). STL is read by Open3D's triangle-mesh reader, its console messages silenced, and
checked where the format allows it: binary STL's triangle count against the file size, ASCII
STL's closing ``endsolid``. A PLY's vertices come from pcreg's strict parser; Open3D gives its
triangles only when they are needed for the area.
"""

from __future__ import annotations

import logging
import math
import struct
from pathlib import Path

import numpy as np

from pcreg._fs import quiet_native
from pcreg.errors import CorruptFileError, EmptyCloudError
from pcreg.io_formats._common import RawCloud, _one_line, _read_bytes
from pcreg.io_formats.mesh_text import read_obj, read_off

logger = logging.getLogger("pcreg.io")

MESH_FORMATS = (".obj", ".off", ".stl")
#: the vertices are the cloud when sqrt(area / vertices) <= DENSE_SPACING x the bbox diagonal
DENSE_SPACING = 0.01
#: spacing of a surface sample, as a fraction of the bounding-box diagonal
SAMPLE_SPACING = 0.005
SAMPLE_MIN = 10_000
SAMPLE_MAX = 200_000


def _open3d():
    try:
        import open3d as o3d
    except ImportError as exc:  # pragma: no cover - open3d is a core dependency
        raise ImportError("reading meshes needs open3d: pip install open3d-cpu") from exc
    return o3d


def _open3d_mesh(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (V, 3) float64, triangles (F, 3) int64) by Open3D's reader, quietly (what it
    prints is logged at DEBUG)."""
    o3d = _open3d()
    with (
        quiet_native() as printed,
        o3d.utility.VerbosityContextManager(o3d.utility.VerbosityLevel.Error),
    ):
        mesh = o3d.io.read_triangle_mesh(str(path))
    if printed and printed[0].strip():
        logger.debug("%s: Open3D said: %s", path, _one_line(printed[0]))
    vertices = np.asarray(mesh.vertices, dtype=np.float64)
    triangles = np.asarray(mesh.triangles, dtype=np.int64)
    return vertices, triangles


def triangle_areas(vertices: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """``(F,)`` areas (squared units) of ``triangles (F, 3)`` indexing ``vertices (V, 3)``."""
    a, b, c = (vertices[triangles[:, k]] for k in range(3))
    return 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)


def sample_surface(
    vertices: np.ndarray, triangles: np.ndarray, count: int, seed: int = 0
) -> np.ndarray:
    """``(count, 3) float64`` points uniform on the surface (triangles drawn by area, then a
    uniform point in each), reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    areas = triangle_areas(vertices, triangles)
    picked = rng.choice(len(triangles), size=count, p=areas / areas.sum())
    u, v = rng.random(count), rng.random(count)
    flip = u + v > 1
    u[flip], v[flip] = 1 - u[flip], 1 - v[flip]
    a, b, c = (vertices[triangles[picked, k]] for k in range(3))
    return a + u[:, None] * (b - a) + v[:, None] * (c - a)


def mesh_cloud(
    path: Path, vertices: np.ndarray, triangles: np.ndarray, *, shared: bool = True
) -> RawCloud:
    """The cloud of a mesh by the rule of this module: its vertices, or a surface sample
    (always when ``shared`` is False: STL's unshared corners). Logs which: the vertices at
    INFO, a sample (points that are not in the file) at WARNING."""
    kind = path.suffix[1:].upper()
    finite = np.isfinite(vertices).all(axis=1)
    ok = finite[triangles].all(axis=1) if len(triangles) else np.zeros(0, bool)
    tris = triangles[ok]
    area = float(triangle_areas(vertices, tris).sum()) if len(tris) else 0.0
    live = vertices[finite]
    diagonal = float(np.linalg.norm(live.max(0) - live.min(0))) if len(live) else 0.0
    spacing = math.sqrt(area / max(len(vertices), 1))
    described = f"{kind} mesh of {len(vertices)} vertices and {len(triangles)} triangles"
    if shared and (area == 0 or diagonal == 0 or spacing <= DENSE_SPACING * diagonal):
        logger.info("%s: %s: its vertices are the cloud", path, described)
        return RawCloud(vertices, content=f"mesh vertices ({described})")
    if area == 0:
        raise EmptyCloudError(path, f"{described} has no surface to sample (zero area)")
    count = int(np.clip(math.ceil(area / (SAMPLE_SPACING * diagonal) ** 2), SAMPLE_MIN, SAMPLE_MAX))
    why = "STL has no shared vertices"
    if shared:
        why = f"vertices {spacing / diagonal:.1%} of its size apart, over {DENSE_SPACING:.0%}"
    logger.warning(
        "%s: %s: read as a uniform sample of %d surface points (%s)", path, described, count, why
    )
    points = sample_surface(vertices, tris, count)
    return RawCloud(points, content=f"surface sample of {count} points ({described}; {why})")


def _check_stl(path: Path, data: bytes) -> None:
    """CorruptFileError for a binary STL whose size disagrees with its triangle count, or an
    ASCII STL without its closing ``endsolid``."""
    if data[:5].lower() == b"solid" and b"facet" in data[:1000]:
        if b"endsolid" not in data[-1000:].lower():
            raise CorruptFileError(path, "ASCII STL has no closing 'endsolid': truncated")
        return
    if len(data) < 84:
        raise CorruptFileError(path, f"binary STL of {len(data)} bytes has no header: truncated")
    (count,) = struct.unpack_from("<I", data, 80)
    if len(data) < 84 + 50 * count:
        raise CorruptFileError(
            path,
            f"binary STL declares {count} triangles ({84 + 50 * count} bytes) but the file "
            f"has {len(data)}: truncated",
        )


def read_mesh(path: Path) -> RawCloud:
    """The cloud of an OBJ, OFF or STL mesh file (see the module's rule)."""
    suffix = path.suffix.lower()
    data = _read_bytes(path)
    if not data.strip():
        raise EmptyCloudError(path, "file is empty (0 bytes)")
    if suffix == ".obj":
        vertices, triangles = read_obj(path, data)
    elif suffix == ".off":
        vertices, triangles = read_off(path, data)
    else:
        _check_stl(path, data)
        try:
            vertices, triangles = _open3d_mesh(path)
        except Exception as exc:
            raise CorruptFileError(path, f"cannot be read as STL ({_one_line(exc)})") from exc
        if len(vertices) == 0:
            raise CorruptFileError(path, "no vertices could be read as STL: corrupt or empty")
        if len(triangles) and (triangles.min() < 0 or triangles.max() >= len(vertices)):
            raise CorruptFileError(path, "a face refers to a vertex that does not exist: corrupt")
    if len(triangles) == 0:
        logger.info("%s: no faces: its %d vertices are the cloud", path, len(vertices))
        return RawCloud(vertices, content="vertices (no faces)")
    return mesh_cloud(path, vertices, triangles, shared=suffix != ".stl")


def ply_mesh_cloud(path: Path, raw: RawCloud) -> RawCloud:
    """The cloud of a PLY mesh whose vertices ``raw`` pcreg's parser read: those vertices,
    or a surface sample of the triangles Open3D reads (see the module's rule)."""
    vertices, triangles = _open3d_mesh(path)
    if (
        len(vertices) != len(raw.xyz)
        or len(triangles) == 0
        or triangles.min() < 0
        or triangles.max() >= len(vertices)
    ):  # pcreg's parser checked the file: the faces are beyond Open3D (e.g. polygons)
        logger.info(
            "%s: PLY mesh whose faces Open3D cannot read: its %d vertices are the cloud",
            path, len(raw.xyz),
        )  # fmt: skip
        return RawCloud(raw.xyz, content="mesh vertices (faces not read)")
    return mesh_cloud(path, raw.xyz, triangles)
