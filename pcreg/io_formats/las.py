"""LAS / LAZ through laspy: scales, offsets and the point count checked, laspy kept quiet."""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from pcreg.errors import CorruptFileError
from pcreg.io_formats._common import (
    _AXES,
    RawCloud,
    _one_line,
)


@contextlib.contextmanager
def _quiet_laspy() -> Iterator[list[str]]:
    """Keep laspy's log records and warnings off the terminal; yields the messages."""
    messages: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(_one_line(record.getMessage()))

    log = logging.getLogger("laspy")
    handler, propagate = _Keep(), log.propagate
    log.addHandler(handler)
    log.propagate = False
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield messages
        messages.extend(_one_line(w.message) for w in caught)
    finally:
        log.removeHandler(handler)
        log.propagate = propagate


def read_las(path: Path) -> RawCloud:
    """Scaled x, y, z of a LAS/LAZ file as ``(N, 3) float64``; CorruptFileError for a scale
    of 0, a non-finite scale or offset, or fewer points than the header declares."""
    try:
        import laspy
    except ImportError as exc:  # pragma: no cover - laspy is a core dependency
        raise ImportError("reading .las/.laz needs laspy: pip install 'laspy[lazrs]'") from exc
    _check_layout(path)  # before laspy reads a count or a length it was given
    with _quiet_laspy() as messages:
        try:
            with laspy.open(path) as reader:
                header = reader.header
                for axis, scale, offset in zip(_AXES, header.scales, header.offsets, strict=True):
                    if not (math.isfinite(scale) and math.isfinite(offset)):
                        raise CorruptFileError(
                            path, f"LAS header {axis} scale {scale} / offset {offset} is not finite"
                        )
                    if scale < 0:
                        raise CorruptFileError(
                            path, f"LAS header {axis} scale {scale} is negative: a mirrored cloud"
                        )
                    if scale == 0:
                        raise CorruptFileError(
                            path, f"LAS header {axis} scale is 0: every {axis} would be the offset"
                        )
                declared = int(header.point_count)
                _check_size(path, header, declared)
                data = reader.read()
            xyz = np.stack([np.asarray(data.x), np.asarray(data.y), np.asarray(data.z)], axis=1)
        except CorruptFileError:
            raise
        except Exception as exc:
            detail = _one_line(exc) or type(exc).__name__
            raise CorruptFileError(path, f"cannot be read as LAS/LAZ ({detail})") from exc
    if len(xyz) != declared:
        note = f" ({messages[-1]})" if messages else ""
        raise CorruptFileError(
            path,
            f"LAS header declares {declared} points but only {len(xyz)} could be read: "
            f"truncated or corrupt{note}",
        )
    return RawCloud(xyz.astype(np.float64, copy=False))


#: the public header's size by minor version (LAS 1.0 to 1.5)
_HEADER_SIZES = {0: 227, 1: 227, 2: 227, 3: 235, 4: 375, 5: 393}
_VLR_HEADER, _EVLR_HEADER = 54, 60


def _check_layout(path: Path) -> None:
    """Refuse a file whose header lays out more than the file holds, from the file's size and
    at most a few hundred bytes of it, before laspy reads anything: laspy loops over the
    declared VLRs and EVLRs (up to 2^32 each) and reads each declared length (an EVLR's is 8
    bytes wide) and the declared offset to the point data in one ``read``, which allocates it
    first. A 404-byte garbage file behind a ``LASF`` signature ran for minutes and took
    gigabytes that way."""
    import struct

    size = Path(path).stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(_HEADER_SIZES[4])
        if head[:4] != b"LASF":
            raise CorruptFileError(path, "not a LAS/LAZ file (no LASF signature)")
        if len(head) < _HEADER_SIZES[0]:
            raise CorruptFileError(
                path, f"{size} bytes: too short for a LAS header ({_HEADER_SIZES[0]} bytes)"
            )
        major, minor = head[24], head[25]
        if major != 1 or minor not in _HEADER_SIZES:
            raise CorruptFileError(path, f"LAS version {major}.{minor} (pcreg reads 1.0 to 1.5)")
        header_size, to_points, vlrs = struct.unpack_from("<HII", head, 94)
        if not _HEADER_SIZES[minor] <= header_size <= to_points <= size:
            raise CorruptFileError(
                path, f"LAS {major}.{minor} header of {header_size} bytes with its points at "
                f"byte {to_points} of a {size}-byte file: truncated or corrupt"
            )  # fmt: skip
        if vlrs * _VLR_HEADER > to_points - header_size:
            raise CorruptFileError(
                path, f"LAS header declares {vlrs} VLRs, more than the "
                f"{to_points - header_size} bytes before the points can hold: corrupt"
            )  # fmt: skip
        if head[104] & 0xC0 == 0x80:  # LAZ: its chunk table, read before any point
            _check_chunk_table(path, handle, to_points, size)
        if minor < 4:
            return
        if len(head) < _HEADER_SIZES[4]:
            raise CorruptFileError(path, f"{size} bytes: too short for a LAS 1.{minor} header")
        start, evlrs = struct.unpack_from("<QI", head, 235)
        if evlrs == 0:
            return
        if start < to_points or start + evlrs * _EVLR_HEADER > size:
            raise CorruptFileError(
                path, f"LAS header declares {evlrs} EVLRs from byte {start} of a {size}-byte "
                "file: truncated or corrupt"
            )  # fmt: skip
        at = start
        for k in range(evlrs):  # at most size / 60 of them, 60 bytes read each
            handle.seek(at)
            record = handle.read(_EVLR_HEADER)
            at += _EVLR_HEADER + (
                struct.unpack_from("<Q", record, 20)[0] if len(record) == 60 else size
            )
            if at > size:
                raise CorruptFileError(
                    path, f"LAS EVLR {k} of {evlrs} ends past the end of the {size}-byte file: "
                    "truncated or corrupt"
                )  # fmt: skip


def _check_chunk_table(path: Path, handle, to_points: int, size: int) -> None:
    """A LAZ file's chunk table (its offset is the first 8 bytes of the point data) must lie
    in the file and declare no more chunks than the file has bytes: LASzip (lazrs) decodes
    every declared entry before the first point (a garbage count ran for minutes)."""
    import struct

    handle.seek(to_points)
    raw = handle.read(8)
    if len(raw) < 8:
        raise CorruptFileError(path, f"LAZ point data at byte {to_points} of a {size}-byte file")
    (table,) = struct.unpack("<q", raw)
    if table == -1:  # written without a table (streamed): LASzip reads the chunks in turn
        return
    if not to_points + 8 <= table <= size - 8:
        raise CorruptFileError(
            path, f"LAZ chunk table at byte {table} of a {size}-byte file: truncated or corrupt"
        )
    handle.seek(table)
    _version, chunks = struct.unpack("<II", handle.read(8))
    if chunks > size - to_points:
        raise CorruptFileError(
            path, f"LAZ chunk table declares {chunks} chunks in a {size}-byte file: corrupt"
        )


#: a LAZ file holds at most this many times its size in uncompressed point records (LASzip
#: reaches 5-15x on real scans; a header claiming more is refused before any allocation)
LAZ_RATIO_MAX = 50


def _check_size(path: Path, header, declared: int) -> None:
    """Refuse a header whose point count the file cannot hold: a LAS file must contain
    ``count x record size`` bytes after the header, a LAZ file at most
    :data:`LAZ_RATIO_MAX` x its size. Before any allocation: a 404-byte file declaring 2^32
    points asked for over 8 GB."""
    size = Path(path).stat().st_size
    record = int(header.point_format.size)
    need = declared * record
    if getattr(header, "are_points_compressed", False):
        if need > LAZ_RATIO_MAX * size:
            raise CorruptFileError(
                path, f"LAZ header declares {declared} points ({need / 2**30:.1f} GiB of "
                f"records) in a {size}-byte file: corrupt"
            )  # fmt: skip
        return
    start = int(getattr(header, "offset_to_point_data", 0))
    if start + need > size:
        raise CorruptFileError(
            path, f"LAS header declares {declared} points ({need} bytes from byte {start}) "
            f"but the file has {size} bytes: truncated or corrupt"
        )  # fmt: skip
