"""Point arrays stored as numpy files, KITTI ``.bin`` scans and text rows: the simple
formats :func:`pcreg.io.read_points` reads without a header parser."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from pcreg.errors import CorruptFileError, EmptyCloudError, ShapeError

__all__ = ["read_kitti_bin", "read_npy", "read_npz", "read_text"]


def read_npy(path: Path) -> np.ndarray:
    """The array of a plain ``.npy`` file (no pickles)."""
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise CorruptFileError(path, f"not a plain numeric .npy array ({exc})") from exc
    except Exception as exc:
        raise CorruptFileError(path, f"cannot be read as .npy ({exc})") from exc


def read_npz(path: Path) -> np.ndarray:
    """The ``points`` (or ``xyz``, ``pos``, ``positions``, or only) array of an ``.npz``."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            keys = list(archive.keys())
            for key in ("points", "xyz", "pos", "positions"):
                if key in keys:
                    return archive[key]
            if len(keys) == 1:
                return archive[keys[0]]
    except Exception as exc:
        raise CorruptFileError(path, f"cannot be read as .npz ({exc})") from exc
    raise ShapeError(path, f"no 'points' array in the archive (keys: {', '.join(keys) or 'none'})")


def read_kitti_bin(path: Path) -> np.ndarray:
    """A KITTI Velodyne scan: ``(N, 4) float32`` x, y, z, intensity records."""
    size = path.stat().st_size
    if size == 0:
        raise EmptyCloudError(path, "point cloud is empty (0 bytes)")
    if size % 16:
        raise CorruptFileError(
            path,
            f"size {size} bytes is not a multiple of 16: not a KITTI Velodyne scan "
            "(float32 x, y, z, intensity records)",
        )
    return np.fromfile(path, dtype=np.float32).reshape(-1, 4)


def read_text(path: Path) -> np.ndarray:
    """``.xyz`` / ``.txt`` / ``.csv`` rows (commas or whitespace; ``#`` comments, whole lines
    or after the values; a UTF-8 byte-order mark; one header line allowed) as
    ``(N, C) float64``. Rows are parsed as they are read (no list of the file's lines is
    kept). Errors name the line of the file."""

    def parse(line: str, lineno: int) -> list[float]:
        # Commas and whitespace both separate values (.csv, .xyz and .txt alike).
        try:
            return [float(v) for v in line.replace(",", " ").split()]
        except ValueError as exc:
            raise CorruptFileError(path, f"line {lineno}: non-numeric value ({exc})") from exc

    rows: list[list[float]] = []
    seen = False  # a data line (or the header) was read
    try:
        with open(path, encoding="utf-8-sig") as handle:
            for lineno, line in enumerate(handle, start=1):
                text = line.partition("#")[0].strip()
                if not text:
                    continue
                if not seen:  # the first line may be a header (column names)
                    seen = True
                    with contextlib.suppress(CorruptFileError):  # the header: left out
                        rows.append(parse(text, lineno))
                    continue
                rows.append(parse(text, lineno))
    except UnicodeDecodeError as exc:
        raise CorruptFileError(path, "not a text file (invalid UTF-8)") from exc
    if not seen:
        raise EmptyCloudError(path, "point cloud is empty (no data lines)")
    if not rows:
        raise EmptyCloudError(path, "point cloud is empty (only a header line)")
    widths = {len(r) for r in rows}
    if len(widths) != 1:
        raise CorruptFileError(path, f"rows have different numbers of columns: {sorted(widths)}")
    return np.asarray(rows, dtype=np.float64)
