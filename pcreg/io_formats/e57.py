"""E57 (ASTM E2807) through pye57: one scan of the file, its pose applied.

An E57 file holds one or more scans ("data3D" entries), each with its points in the scanner's
own frame and a rigid pose (unit quaternion ``w, x, y, z`` and translation, metres) that puts
them in the file's world frame. A scan is addressed by its 0-based index, ``file.e57#2``; a
file of one scan needs no index. Points the file marks invalid (``cartesianInvalidState`` or
``sphericalInvalidState`` not 0: no return, or a direction without a range) are flagged for
:func:`pcreg.io.read_points` to drop and count.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pcreg.errors import CorruptFileError, InputError
from pcreg.io_formats._common import RawCloud, _one_line, check_index

_CARTESIAN = ("cartesianX", "cartesianY", "cartesianZ")
_SPHERICAL = ("sphericalRange", "sphericalAzimuth", "sphericalElevation")


def _pye57():
    try:
        import pye57
    except ImportError as exc:  # pragma: no cover - pye57 is a core dependency
        raise ImportError("reading .e57 needs pye57: pip install 'pye57>=0.4.19'") from exc
    return pye57


def scan_index(path: Path, selector: str | None, count: int) -> int:
    """The 0-based scan index of ``selector`` (the text after ``#``) in a file of ``count``
    scans; InputError, naming the count and how to address a scan, when it is missing (and
    the file holds several), not an integer or out of range."""
    name = path.name
    if selector is None:
        if count == 1:
            return 0
        if count == 0:
            raise CorruptFileError(path, "E57 file holds no scans")
        raise InputError(
            path,
            f"E57 file holds {count} scans: address one as {name}#0 to {name}#{count - 1} "
            "(0-based)",
        )
    try:
        index = int(selector)
    except ValueError:
        raise InputError(
            path, f"'#{selector}' is not a scan index: address a scan as {name}#0 (0-based)"
        ) from None
    check_index(path, index, count, "scan", "the file holds")
    return index


def _pose(header, path: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """(R (3, 3), t (3,)) of a scan's pose, or None when it has none."""
    if not header.has_pose():
        return None
    pose = header.node["pose"]
    rotation, translation = np.eye(3), np.zeros(3)
    if pose.isDefined("rotation"):
        q = np.array([pose["rotation"][k].value() for k in ("w", "x", "y", "z")], float)
        norm = np.linalg.norm(q)
        if not np.isfinite(norm) or norm == 0:
            raise CorruptFileError(path, f"E57 scan pose has a bad quaternion {q}")
        w, x, y, z = q / norm
        rotation = np.array(
            [
                [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
            ]
        )
    if pose.isDefined("translation"):
        translation = np.array([pose["translation"][k].value() for k in ("x", "y", "z")], float)
    return rotation, translation


def read_e57(path: Path, selector: str | None = None) -> RawCloud:
    """x, y, z of scan ``selector`` (0-based index as text; None for a one-scan file) of an
    E57 file as ``(N, 3) float64`` in the file's world frame (the scan's pose applied),
    metres; the points the file marks invalid flagged."""
    pye57 = _pye57()
    try:
        e57 = pye57.E57(str(path))
    except Exception as exc:
        raise CorruptFileError(path, f"cannot be read as E57 ({_one_line(exc)})") from exc
    try:
        count = int(e57.scan_count)
        index = scan_index(path, selector, count)
        try:
            header = e57.get_header(index)
            fields = set(header.point_fields)
            if set(_CARTESIAN) <= fields:
                names, state = list(_CARTESIAN), "cartesianInvalidState"
            elif set(_SPHERICAL) <= fields:
                names, state = list(_SPHERICAL), "sphericalInvalidState"
            else:
                raise CorruptFileError(
                    path, f"E57 scan #{index} has neither cartesian nor spherical coordinates"
                )
            if state in fields:
                names.append(state)
            data, buffers = e57.make_buffers(names, header.point_count)
            header.points.reader(buffers).read()
            pose = _pose(header, path)
        except InputError:
            raise
        except Exception as exc:
            raise CorruptFileError(
                path, f"E57 scan #{index} cannot be read ({_one_line(exc)}): corrupt"
            ) from exc
    finally:
        e57.close()
    if names[0] == "cartesianX":
        xyz = np.stack([np.asarray(data[k], np.float64) for k in _CARTESIAN], axis=1)
    else:
        r, az, el = (np.asarray(data[k], np.float64) for k in _SPHERICAL)
        xyz = np.stack(
            [r * np.cos(el) * np.cos(az), r * np.cos(el) * np.sin(az), r * np.sin(el)], 1
        )
    if pose is not None:
        xyz = xyz @ pose[0].T + pose[1]
    marked = None
    if state in data:
        marked = np.asarray(data[state]) != 0
        marked = marked if marked.any() else None
    content = f"scan #{index} of {count}" + (", pose applied" if pose is not None else "")
    return RawCloud(xyz, marked, "marked invalid by the E57 file (no return)", None, content)
