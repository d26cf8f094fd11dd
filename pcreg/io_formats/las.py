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
