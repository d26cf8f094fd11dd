"""Point arrays stored as numpy files and KITTI ``.bin`` scans: the simple
formats :func:`pcreg.io.read_points` reads without a header parser."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pcreg._text import size_text, sizes_apart
from pcreg.errors import CorruptFileError, EmptyCloudError, InputError, ShapeError
from pcreg.io_formats._common import MAX_MEMORY_ADVICE

__all__ = ["read_kitti_bin", "read_npy", "read_npz"]


#: bytes per value that reading a numpy array takes beside the array itself: its float64
#: x, y, z and the validation's copy (8 bytes each per value, whatever the file's dtype)
ARRAY_COPY_BYTES = 16


def _declared(path: Path, stream, what: str) -> tuple[tuple[int, ...], int, int]:
    """``(shape, values, data bytes)`` of the ``.npy`` header at the start of ``stream``, read
    without the data; an array of pickled objects is refused here."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(stream)
        if version == (1, 0):
            shape, _, dtype = fmt.read_array_header_1_0(stream)
        else:
            shape, _, dtype = fmt.read_array_header_2_0(stream)
    except Exception as exc:
        raise CorruptFileError(path, f"not a plain numeric {what} array ({exc})") from exc
    if dtype.hasobject:
        raise CorruptFileError(path, f"not a plain numeric {what} array (pickled objects)")
    count = 1
    for n in shape:
        count *= int(n)
    return shape, count, count * dtype.itemsize


def _check_declared(path: Path, shape, count: int, nbytes: int, cap: int | None, what: str) -> None:
    """Refuse an array (``count`` values, ``nbytes`` of data) whose header declares more than
    ``cap`` bytes of reading, before any of its data is read or unpacked (1.4 MB of deflated
    zeros can declare 1.4 GB)."""
    need = nbytes + ARRAY_COPY_BYTES * count
    if cap is not None and need > cap:
        need_text, cap_text = sizes_apart(need, cap)
        raise InputError(
            path,
            f"too large to read under the memory cap: its {what} array declares shape "
            f"{tuple(int(n) for n in shape)} ({size_text(nbytes)}), which needs about "
            f"{need_text}, over {cap_text} (raise {MAX_MEMORY_ADVICE}, or thin the file)",
        )


def read_npy(path: Path, cap: int | None = None) -> np.ndarray:
    """The array of a plain ``.npy`` file (no pickles). Its header is read first: an array
    over ``cap`` bytes of reading (None: no cap), or one with less data in the file than the
    header declares, is refused before anything is allocated."""
    try:
        with open(path, "rb") as handle:
            shape, count, nbytes = _declared(path, handle, ".npy")
            offset = handle.tell()
    except OSError as exc:
        raise CorruptFileError(path, f"cannot be read as .npy ({exc})") from exc
    present = path.stat().st_size - offset
    if present < nbytes:  # before the cap: a corrupt file is not called too large
        raise CorruptFileError(
            path,
            f"truncated: its header declares shape {tuple(int(n) for n in shape)} "
            f"({nbytes} bytes of data), the file holds {present}",
        )
    _check_declared(path, shape, count, nbytes, cap, ".npy")
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise CorruptFileError(path, f"not a plain numeric .npy array ({exc})") from exc
    except Exception as exc:
        raise CorruptFileError(path, f"cannot be read as .npy ({exc})") from exc


def read_npz(path: Path, cap: int | None = None) -> np.ndarray:
    """The ``points`` (or ``xyz``, ``pos``, ``positions``, or only) array of an ``.npz``.
    The chosen array's header is read first (unpacking only that much): one over ``cap``
    bytes of reading (None: no cap) is refused before its data is unpacked."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            members = {n.removesuffix(".npy"): n for n in archive.namelist()}
            names = list(members)
            key = next((k for k in ("points", "xyz", "pos", "positions") if k in names), None)
            if key is None and len(names) == 1:
                key = names[0]
            if key is not None:
                with archive.open(members[key]) as member:
                    shape, count, nbytes = _declared(path, member, f".npz '{key}'")
    except InputError:
        raise
    except Exception as exc:
        raise CorruptFileError(path, f"cannot be read as .npz ({exc})") from exc
    if key is None:
        raise ShapeError(
            path, f"no 'points' array in the archive (keys: {', '.join(names) or 'none'})"
        )
    _check_declared(path, shape, count, nbytes, cap, f".npz '{key}'")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return archive[key]
    except Exception as exc:
        raise CorruptFileError(path, f"cannot be read as .npz ({exc})") from exc


#: a KITTI scan's 4th value is its reflectance, 0-1 (0-255 in some exports): a file where more
#: than this share of them is negative holds other records (a nuScenes scan's five values a
#: point, read four at a time, puts x and y there: 30-40 % negative)
MAX_NEGATIVE_INTENSITY = 0.05


def read_kitti_bin(path: Path) -> np.ndarray:
    """A KITTI Velodyne scan: ``(N, 4) float32`` x, y, z, intensity records; a nuScenes
    LiDAR scan (a name ending ``.pcd.bin``): ``(N, 5) float32`` x, y, z, intensity, ring.
    Records whose intensities are implausible (mostly negative) are refused: they are not
    KITTI's."""
    size = path.stat().st_size
    if size == 0:
        raise EmptyCloudError(path, "point cloud is empty (0 bytes)")
    nuscenes = path.name.lower().endswith(".pcd.bin")
    width, what = (5, "nuScenes (float32 x, y, z, intensity, ring)") if nuscenes else (
        4, "KITTI Velodyne (float32 x, y, z, intensity)"
    )  # fmt: skip
    if size % (4 * width):
        raise CorruptFileError(
            path, f"size {size} bytes is not a multiple of {4 * width}: not a {what} scan"
        )
    records = np.fromfile(path, dtype=np.float32).reshape(-1, width)
    with np.errstate(invalid="ignore"):
        negative = float(np.mean(records[:, 3] < 0))
    if negative > MAX_NEGATIVE_INTENSITY:
        raise CorruptFileError(
            path,
            f"not a {what} scan: {negative:.0%} of its intensities are negative"
            + ("" if nuscenes else ": other records (float64 values, or a nuScenes scan of 5 "
               "values a point, which is read when its name ends in .pcd.bin; save plain x, y, z "
               "arrays as .npy)"),
        )  # fmt: skip
    return records
