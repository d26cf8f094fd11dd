"""Reading and writing point clouds, with validation and clear errors; the readers and writers
of 4x4 transforms (:mod:`pcreg.io_formats.transform`) are re-exported here.

Points come back as ``(N, 3) float64`` arrays in the file's units (metres for every dataset
pcreg knows): values stored as float32 convert exactly, and georeferenced coordinates (UTM
eastings of 5e5 m, northings of 4.2e6 m) keep the millimetres float32 would lose.
Transforms are ``(4, 4) float64`` matrices ``T_ref_src`` in the column-vector convention
``ref = R @ src + t`` (DESIGN §2).

Supported point formats (by extension, case-insensitive):

=============  =====================================================================
``.ply``       ASCII or binary (either byte order); a point cloud, or a mesh (below)
``.pcd``       DATA ascii, binary or binary_compressed
``.npy``       array ``(N, C)``, C >= 3; the first three columns are x, y, z
``.npz``       key ``points`` (else ``xyz``, ``pos`` or ``positions``, else the only array)
``.bin``       KITTI Velodyne: float32 records x, y, z, intensity (16 bytes each); a name
               ending ``.pcd.bin``: nuScenes LiDAR, x, y, z, intensity, ring (20 bytes)
``.xyz``       text rows, >= 3 columns (``.txt``, ``.csv``; whitespace, ``,`` or ``;``
               between values, decimal commas): a header naming x, y, z picks them
``.las/.laz``  laspy (scaled x, y, z); ``.laz`` needs the lazrs backend (installed)
``.e57``       pye57: one scan, its pose applied (the file's world frame); ``FILE.e57#K``
               is scan K, 0-based (a file of one scan needs no ``#K``)
``.obj/.off``  a mesh (pcreg's parser, polygons fanned into triangles): its vertices, or a
               uniform surface sample when they are sparse for its area
               (:mod:`pcreg.io_formats.mesh` gives the rule)
``.stl``       a mesh without shared vertices: always a uniform surface sample
``.bag``       ROS 1 bag; ``.db3``/``.mcap`` or a folder with ``metadata.yaml``: ROS 2 bag.
               One sensor_msgs/PointCloud2 message, ``BAG#/TOPIC#K`` (K 0-based, default
               0), in the message's frame (:mod:`pcreg.io_formats.rosbag`)
=============  =====================================================================

A file that holds several clouds is addressed as ``FILE#SELECTOR`` (see
:func:`split_address`); a path that exists as given is always taken whole.

Invalid points are dropped and counted by default: NaN/Inf coordinates (the PCL/ROS mark of
a pixel without depth) and the points a format marks invalid (the ``(0, 0, 0)`` pixels of an
organised cloud). Each read that drops some logs one WARNING naming the file and the count, and
says so plainly when most of the cloud is invalid (over 90 %, or fewer than
:data:`MIN_VALID_POINTS` left); ``read_points(..., return_info=True)`` also returns a
:class:`ReadInfo` with ``dropped_invalid``. ``nan_policy="error"`` (``--strict-input`` on the
command line) refuses such files instead.

Every failure raises a subclass of :class:`pcreg.errors.InputError` whose message starts
with the file path and fits on one line. A truncated or corrupt file is a
:class:`~pcreg.errors.CorruptFileError`, never a cloud padded or cut short: PLY, PCD and LAS
point counts are checked against the header and the data actually present
(:mod:`pcreg.io_formats`), and no reader prints anything. Writers are atomic and refuse to
overwrite unless ``overwrite=True``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload

import numpy as np

from pcreg._fs import atomic_output
from pcreg._text import size_text, sizes_apart
from pcreg.errors import (
    EmptyCloudError,
    InputError,
    NonFiniteError,
    ShapeError,
)
from pcreg.io_formats import (
    MESH_FORMATS,
    ROS_FORMATS,
    RawCloud,
    is_rosbag2_dir,
    ply_mesh_cloud,
    read_e57,
    read_las,
    read_mesh,
    read_pcd,
    read_ply,
    read_rosbag,
    write_ply,
)
from pcreg.io_formats._common import (
    MAX_MEMORY_ADVICE,
    check_file,
    check_suffix,
)
from pcreg.io_formats.arrays import read_kitti_bin, read_npy, read_npz
from pcreg.io_formats.text import read_text
from pcreg.io_formats.transform import (
    MAX_TRANSLATION,
    RIGID_ATOL,
    TRANSFORM_FORMATS,
    read_transform,
    validate_transform,
    write_transform,
)

__all__ = [
    "MAX_TRANSLATION",
    "POINT_READ_FORMATS",
    "POINT_WRITE_FORMATS",
    "RIGID_ATOL",
    "TRANSFORM_FORMATS",
    "ReadInfo",
    "read_points",
    "read_transform",
    "split_address",
    "validate_points",
    "validate_transform",
    "write_points",
    "write_transform",
    "xyz_columns",
]

logger = logging.getLogger(__name__)

POINT_READ_FORMATS = (
    ".ply",
    ".pcd",
    ".npy",
    ".npz",
    ".bin",
    ".xyz",
    ".txt",
    ".csv",
    ".las",
    ".laz",
    ".e57",
    *MESH_FORMATS,
    *ROS_FORMATS,
)
#: formats whose files hold several clouds, one addressed as ``FILE#SELECTOR`` (and a
#: ROS 2 bag's folder)
MULTI_CLOUD_FORMATS = (".e57", *ROS_FORMATS)
POINT_WRITE_FORMATS = (".ply", ".npy")

PathLike = str | os.PathLike[str]
NanPolicy = Literal["error", "drop"]

#: a cloud with fewer valid points than this (or under 10 % valid) is called mostly invalid
MIN_VALID_POINTS = 100


@dataclass(frozen=True)
class ReadInfo:
    """What :func:`read_points` did with a file (``return_info=True``).

    Attributes:
        source: the path as given.
        total: points in the file, invalid ones included.
        dropped_invalid: points dropped: NaN/Inf coordinates plus those the format marks
            invalid (``dropped_marked`` of them).
        dropped_marked: of ``dropped_invalid``, the finite points the format marks invalid
            (an organised cloud's ``(0, 0, 0)`` pixels).
        organized: ``(height, width)`` of an organised cloud, else None.
        content: what the points are: ``"points"`` for a point cloud, ``"scan #2 of 3, pose
            applied"`` for a scan of an E57 file, ``"mesh vertices (...)"`` or ``"surface
            sample of N points (...)"`` for a mesh.
    """

    source: str
    total: int
    dropped_invalid: int = 0
    dropped_marked: int = 0
    organized: tuple[int, int] | None = None
    content: str = "points"

    @property
    def kept(self) -> int:
        """Points returned: ``total - dropped_invalid``."""
        return self.total - self.dropped_invalid

    @property
    def mostly_invalid(self) -> bool:
        """True when over 90 % of the points were invalid, or fewer than
        :data:`MIN_VALID_POINTS` are left."""
        return self.dropped_invalid > 0 and (
            self.kept < MIN_VALID_POINTS or self.kept < 0.1 * self.total
        )


def split_address(path: PathLike) -> tuple[Path, str | None]:
    """``(file, selector)`` of a point-cloud address ``FILE#SELECTOR`` (``scans.e57#2``): the
    text after the first ``#`` selects a cloud inside a file that holds several. A path that
    exists as given is taken whole (selector None), ``#`` in its name and all."""
    text = os.fspath(path)
    whole = Path(text)
    if "#" not in text or whole.exists():
        return whole, None
    head, _, selector = text.partition("#")
    return Path(head), selector


def xyz_columns(points: np.ndarray, source: PathLike = "points") -> np.ndarray:
    """The coordinates of an ``(N, C)`` array with ``C >= 3``: its first 3 columns (a view,
    no copy). More columns, e.g. a KITTI scan's ``(N, 4)`` x, y, z, intensity, are ignored
    with a note at INFO.

    Raises:
        ShapeError: not 2-D, fewer than 3 columns, or 1-4 rows of over 16 columns (the
            coordinates as rows: a transposed array).
    """
    arr = np.asarray(points)
    if arr.ndim != 2 or arr.shape[1] < 3:
        raise ShapeError(source, f"expected an (N, 3) array of points, got shape {arr.shape}")
    if 0 < arr.shape[0] <= 4 and arr.shape[1] > 16:  # x, y, z (and intensity) as rows
        raise ShapeError(
            source,
            f"expected an (N, 3) array of points, got shape {arr.shape}: transposed? "
            "(points are rows; pass the array's .T)",
        )
    if arr.shape[1] == 3:
        return arr
    logger.info(
        "%s: %d columns; x, y, z are the first 3, the other %d are ignored",
        os.fspath(source), arr.shape[1], arr.shape[1] - 3,
    )  # fmt: skip
    return arr[:, :3]


def validate_points(
    points: np.ndarray, source: PathLike = "points", *, nan_policy: NanPolicy = "error"
) -> np.ndarray:
    """Check an array of points and return it as a contiguous ``(N, 3) float64`` array.

    Float32 and integer inputs convert exactly; the result is always a new array. (An array
    in memory refuses NaN/Inf by default; :func:`read_points` drops them by default, as the
    formats use them to mark pixels without depth.)

    Args:
        points: array-like ``(N, C)`` with ``C >= 3``; columns beyond the third are ignored.
        source: file path or argument name used in error messages.
        nan_policy: ``"error"`` raises on NaN/Inf rows, ``"drop"`` removes them with a warning.

    Raises:
        ShapeError: not 2-D, or fewer than 3 columns, or not numeric.
        NonFiniteError: NaN/Inf present and ``nan_policy == "error"``.
        EmptyCloudError: no points (before or after dropping).
        ValueError: ``nan_policy`` is neither ``"error"`` nor ``"drop"``.
    """
    return _validate(points, source, nan_policy)[0]


def _validate(
    points: np.ndarray,
    source: PathLike,
    nan_policy: NanPolicy,
    marked: np.ndarray | None = None,
    marked_what: str = "",
) -> tuple[np.ndarray, int, int]:
    """:func:`validate_points`, also dropping the ``marked`` rows (points a format marks
    invalid). Returns (points, invalid rows dropped, of which marked)."""
    if nan_policy not in ("error", "drop"):
        raise ValueError(f"nan_policy must be 'error' or 'drop', got {nan_policy!r}")
    try:
        arr = np.asarray(points)
    except Exception as exc:  # ragged lists and similar
        raise ShapeError(source, f"cannot be converted to an array ({exc})") from exc
    if arr.dtype.kind not in "fiu":
        raise ShapeError(source, f"expected numeric coordinates, got dtype {arr.dtype}")
    arr = xyz_columns(arr, source)  # 2-D, 3 columns or more, not transposed
    if arr.shape[0] == 0:
        raise EmptyCloudError(source, "point cloud is empty (0 points)")
    with np.errstate(over="ignore"):  # a long double beyond 1.8e308 becomes inf: reported
        xyz = np.array(arr[:, :3], dtype=np.float64, order="C")
    finite = np.isfinite(xyz).all(axis=1)
    keep = finite if marked is None else finite & ~marked
    dropped = marked_dropped = 0
    if not keep.all():
        nonfinite = int((~finite).sum())
        marked_dropped = int((finite & ~keep).sum())
        dropped = nonfinite + marked_dropped
        parts = []
        if nonfinite:
            parts.append(f"{nonfinite} with NaN/Inf coordinates")
        if marked_dropped:
            parts.append(f"{marked_dropped} {marked_what or 'marked invalid by the format'}")
        what = " and ".join(parts)
        if nan_policy == "error":
            raise NonFiniteError(
                source,
                f"{dropped} of {len(xyz)} points are invalid ({what}); refused under "
                "--strict-input (nan_policy='error'): read without it to drop them",
            )
        if not keep.any():
            raise EmptyCloudError(source, f"no valid points: all {len(xyz)} are invalid ({what})")
        kept = len(xyz) - dropped
        if kept < MIN_VALID_POINTS or kept < 0.1 * len(xyz):
            logger.warning(
                "%s: most of the cloud is invalid: only %d of %d points are valid (%.1f %%); "
                "dropped %s",
                os.fspath(source), kept, len(xyz), 100.0 * kept / len(xyz), what,
            )  # fmt: skip
        else:
            logger.warning(
                "%s: dropped %d of %d points as invalid (%s)",
                os.fspath(source), dropped, len(xyz), what,
            )  # fmt: skip
        xyz = xyz[keep]
    if arr.dtype == np.float32:
        _check_float32_precision(xyz, source)
    return np.ascontiguousarray(xyz), dropped, marked_dropped


#: a float32 cloud must resolve its own extent into at least this many steps
FLOAT32_MIN_STEPS = 1e4


def _check_float32_precision(xyz: np.ndarray, source: PathLike) -> None:
    """Refuse float32 coordinates too coarse for the cloud: at 4.2e6 m (UTM) float32 steps
    are 0.5 m, so a 4 m room written as float32 there has lost its shape. The test: the
    float32 step at the largest coordinate against the robust extent (1st-99th percentile box
    diagonal)."""
    step = float(np.spacing(np.float32(np.abs(xyz).max())))
    lo, hi = np.percentile(xyz, [1, 99], axis=0)
    extent = float(np.linalg.norm(hi - lo))
    if extent > 0 and extent / step < FLOAT32_MIN_STEPS:
        raise InputError(
            source,
            f"float32 coordinates up to {np.abs(xyz).max():.3g} are spaced {step:.3g} apart, "
            f"too coarse for a cloud spanning {extent:.3g}: the precision was lost when the "
            "file was written (store float64, or subtract an offset before converting)",
        )


#: memory a read may take, by default (bytes); ``read_points(max_memory=...)`` changes it
READ_MEMORY_CAP = 4 << 30
#: peak memory of a read per byte of file: parsed text keeps its lines as Python objects
#: (~100 bytes for a ~35-byte row) beside the parsed columns; binary formats hold the raw
#: bytes, the rows and the float64 copy
#: OBJ: read in bulk (pcreg/io_formats/mesh_text.py), a 105 MB file of a million coloured
#: vertices and a million quads peaked at 1.13 GB (10.8x); OFF is streamed
_READ_MEMORY_FACTOR = {
    ".xyz": 8, ".txt": 8, ".csv": 8, ".ply": 8, ".pcd": 8, ".obj": 12, ".off": 8,
}  # fmt: skip


def _check_read_memory(path: Path, suffix: str, cap: int) -> None:
    """Refuse a file whose reading alone would take more than ``cap`` bytes (before any is
    read). ASCII and binary PLY/PCD are charged as text: which one it is shows only later."""
    need = path.stat().st_size * _READ_MEMORY_FACTOR.get(suffix, 3)
    if need > cap:
        need_text, cap_text = sizes_apart(need, cap)
        raise InputError(
            path,
            f"too large to read under the memory cap: {size_text(path.stat().st_size)} of "
            f"{suffix[1:].upper()} needs about {need_text}, over {cap_text} (raise "
            f"{MAX_MEMORY_ADVICE}, or thin the file)",
        )


@overload
def read_points(
    path: PathLike,
    *,
    nan_policy: NanPolicy = ...,
    max_memory: int | None = ...,
    return_info: Literal[False] = ...,
) -> np.ndarray: ...
@overload
def read_points(
    path: PathLike,
    *,
    nan_policy: NanPolicy = ...,
    max_memory: int | None = ...,
    return_info: Literal[True],
) -> tuple[np.ndarray, ReadInfo]: ...
def read_points(
    path: PathLike,
    *,
    nan_policy: NanPolicy = "drop",
    max_memory: int | None = None,
    return_info: bool = False,
) -> np.ndarray | tuple[np.ndarray, ReadInfo]:
    """Read a point cloud file.

    Args:
        path: a file with one of the extensions in :data:`POINT_READ_FORMATS`, or
            ``FILE#SELECTOR`` for one cloud of a file that holds several
            (:data:`MULTI_CLOUD_FORMATS`): ``scans.e57#2`` is scan 2, 0-based;
            ``run.bag#/velodyne_points#3`` is message 3 of that topic; a ROS 2 bag is its
            folder (``rec#/points``) or one of its storage files.
        nan_policy: ``"drop"`` (default) drops invalid points (NaN/Inf, and the points the
            format marks invalid, e.g. an organised cloud's ``(0, 0, 0)`` pixels) with one
            WARNING naming the file and the count; ``"error"`` refuses the file
            (``--strict-input``).
        max_memory: bytes the read may take (default :data:`READ_MEMORY_CAP`); a larger file
            is refused before it is read.
        return_info: also return a :class:`ReadInfo` (``dropped_invalid`` and the rest).

    Returns:
        ``(N, 3) float64`` coordinates, N >= 1, all finite (float32 values in the file
        convert exactly); with ``return_info``, ``(points, info)``. Units are the file's
        (metres for 3DMatch, KITTI and pcreg's own outputs). Callers that feed a network cast
        to float32 themselves, after centring when the coordinates are large.

    Raises:
        UnknownFormatError, MissingFileError, CorruptFileError, EmptyCloudError,
        NonFiniteError, ShapeError: each with a message that names ``path``.
    """
    address = os.fspath(path)
    path, selector = split_address(address)
    suffix = ".db3" if is_rosbag2_dir(path) else check_file(path, POINT_READ_FORMATS, "point cloud")
    if selector is not None and suffix not in MULTI_CLOUD_FORMATS:
        raise InputError(
            path,
            f"'#{selector}' addresses one cloud inside a file that holds several ("
            + ", ".join(MULTI_CLOUD_FORMATS)
            + f"); a {suffix} file holds one",
        )
    if suffix not in ROS_FORMATS:  # a bag is read one message at a time
        _check_read_memory(path, suffix, READ_MEMORY_CAP if max_memory is None else max_memory)
    if suffix in ROS_FORMATS:
        raw = read_rosbag(path, selector)
    elif suffix == ".e57":
        raw = read_e57(path, selector)
    elif suffix in MESH_FORMATS:
        raw = read_mesh(path)
    elif suffix == ".ply":
        raw = read_ply(path)
        if raw.faces:
            raw = ply_mesh_cloud(path, raw)
    elif suffix == ".pcd":
        raw = read_pcd(path)
    elif suffix == ".npy":
        raw = RawCloud(read_npy(path, READ_MEMORY_CAP if max_memory is None else max_memory))
    elif suffix == ".npz":
        raw = RawCloud(read_npz(path, READ_MEMORY_CAP if max_memory is None else max_memory))
    elif suffix == ".bin":
        raw = RawCloud(read_kitti_bin(path))
    elif suffix in (".las", ".laz"):
        raw = read_las(path)
    else:
        raw = RawCloud(read_text(path))
    source = address if selector is not None else path
    xyz, dropped, marked = _validate(raw.xyz, source, nan_policy, raw.marked, raw.marked_what)
    if not return_info:
        return xyz
    info = ReadInfo(
        os.fspath(source), len(xyz) + dropped, dropped, marked, raw.organized, raw.content
    )
    return xyz, info


def write_points(path: PathLike, points: np.ndarray, *, overwrite: bool = False) -> Path:
    """Write ``(N, 3)`` points atomically as ``.ply`` (binary little-endian) or ``.npy``.

    The values are stored as float32 when that loses nothing (float32 input, or values that
    happen to be float32 numbers), else as float64, so that what :func:`read_points` returns
    equals what was written, to the bit (georeferenced coordinates included).

    Raises:
        UnknownFormatError: extension not in :data:`POINT_WRITE_FORMATS`.
        OutputExistsError: ``path`` exists and ``overwrite`` is False.
        UnwritableOutputError: the directory is missing or not writable.
        ShapeError, NonFiniteError, EmptyCloudError: ``points`` is not a finite cloud.
    """
    path = Path(path)
    suffix = check_suffix(path, POINT_WRITE_FORMATS, "point output")
    xyz = validate_points(points, "points", nan_policy="error")
    with np.errstate(over="ignore"):
        single = xyz.astype(np.float32)
    if np.array_equal(single, xyz):
        xyz = single
    with atomic_output(path, overwrite=overwrite) as tmp:
        if suffix == ".npy":
            with open(tmp, "wb") as handle:
                np.save(handle, xyz)
        else:
            write_ply(tmp, xyz, xyz.dtype)
    return path
