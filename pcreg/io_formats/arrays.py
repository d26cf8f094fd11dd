"""Point arrays stored as numpy files, KITTI ``.bin`` scans and text rows: the simple
formats :func:`pcreg.io.read_points` reads without a header parser."""

from __future__ import annotations

import re
from array import array
from pathlib import Path

import numpy as np

from pcreg._text import size_text, sizes_apart
from pcreg.errors import CorruptFileError, EmptyCloudError, InputError, ShapeError
from pcreg.io_formats._common import MAX_MEMORY_ADVICE, check_text_encoding

__all__ = ["read_kitti_bin", "read_npy", "read_npz", "read_text"]


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


#: a header's names for the coordinates, after :func:`_column_name` (CloudCompare writes
#: ``//X``, surveyors ``Easting Northing Elevation``)
_AXIS_NAMES = (
    ("x", "easting", "east", "e"),
    ("y", "northing", "north", "n"),
    ("z", "elevation", "height", "altitude", "alt", "h"),
)
#: a value with a decimal comma (``-0,042``) or a whole number: a row of these with at least
#: one comma separates its values by whitespace or ``;``
_DECIMAL_COMMA = re.compile(r"[+-]?\d*(?:,\d+)?(?:[eE][+-]?\d+)?")
#: a comma that may be a thousands separator (``1,234``, not ``0,342`` nor ``1,5``)
_THOUSANDS = re.compile(r"[+-]?[1-9]\d{0,2}(?:,\d{3})+")
#: a value with thousands separators and a decimal point (``1,234.5``)
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+\.\d*(?:[eE][+-]?\d+)?")
#: a unit on its own in a header (``X [m] Y [m] Z [m]``)
_UNIT = re.compile(r"[\[(].*[\])]")


def _column_name(word: str) -> str:
    """A header word as a name: quotes, CloudCompare's ``//``, a unit (``x[m]``, ``X (m)``)
    and case left out."""
    word = word.strip().strip("\"'").removeprefix("//").strip()
    return re.split(r"[\[(]", word, maxsplit=1)[0].strip().lower()


def _header_words(text: str) -> list[str]:
    """The column names of a header line: split at commas or semicolons where it has them
    (``x (m),y (m),z (m)``), else at blanks, a unit standing alone dropped."""
    words = re.split(r"[,;]", text) if re.search(r"[,;]", text) else text.split()
    return [w for w in words if not _UNIT.fullmatch(w.strip())]


def _axis_columns(path: Path, header: list[str], width: int) -> list[int] | None:
    """The columns of x, y, z a header names (None: it names none of them, and the first
    three are taken). A header that names some but not all three, or more columns than the
    rows hold where it matters, is refused: its reading would be a guess."""
    names = [_column_name(w) for w in header]
    found = []
    for axis in _AXIS_NAMES:
        hits = [i for i, n in enumerate(names) if n in axis]
        found.append(min(hits, key=lambda i: axis.index(names[i])) if hits else None)
    if all(i is None for i in found):
        return None
    if any(i is None for i in found):
        missing = ", ".join(a[0] for a, i in zip(_AXIS_NAMES, found, strict=True) if i is None)
        raise CorruptFileError(
            path, f"its header ({' '.join(header)}) names no column {missing}: which columns "
            "are the coordinates is unclear (name them x, y, z)"
        )  # fmt: skip
    if max(found) >= width:
        raise CorruptFileError(
            path, f"its header ({' '.join(header)}) names {len(header)} columns, its rows "
            f"hold {width}: which columns are the coordinates is unclear"
        )  # fmt: skip
    return found


def _commented_header(text: str) -> list[str] | None:
    """The column names of a comment that is a header: one that starts with the three
    coordinates' names (``# x y z intensity``, ``# Y X Z``); None for any other comment
    (``# format: X Y Z R G B`` is prose: the columns are then taken as they come)."""
    words = _header_words(text)
    first = {_column_name(w) for w in words[:3]}
    if len(words) >= 3 and all(first & set(axis) for axis in _AXIS_NAMES):
        return words
    return None


class _Grouped(CorruptFileError):
    """A first row whose values have thousands separators: an error, not a header."""


def read_text(path: Path) -> np.ndarray:
    """``.xyz`` / ``.txt`` / ``.csv`` rows (commas, semicolons or whitespace between values;
    quoted values; ``#`` comments, whole lines or after the values; a UTF-8 byte-order mark)
    as ``(N, C) float64``. One header line is allowed: where it names the coordinates (``x y
    z`` in any case and order, ``//X`` as CloudCompare writes, ``Easting Northing
    Elevation``, units as in ``x (m)`` or ``X [m]``; or a comment that starts with them,
    ``# x y z i``) those columns are x, y, z (a pandas index column, ``intensity,x,y,z``);
    otherwise the first three are. Values with a decimal comma (``-0,042 0,342 0,65``,
    ``1,5;2,5;3,5``) are read as such; a file whose every comma may as well be a thousands
    separator (``1,234 2,345 3,456`` throughout) is refused, and so is a value with thousands
    separators and a decimal point (``1,234.5``: its commas would split it). Rows without a
    comma before the first with decimal commas are read as they are (``1 2 3``, then
    ``0,5 1,5 2,5``). The values are kept in one flat
    array as they are read (8 bytes each, whatever the line's length). Errors name the line."""
    comma_decimal = None  # decided on the first data line
    # with decimal commas: the first line whose every comma could be a thousands separator
    # (1,234), None before any, False once a value settles it (the file is then read)
    ambiguous: list = [None]
    width = 0  # values a row, set by the first data line
    commas_seen = False  # a row read without decimal commas had a comma

    def decimal_commas(words: list[str]) -> bool:
        """Whether a row's blank-separated words are values with decimal commas."""
        return len(words) > 1 and any("," in w for w in words) and all(
            _DECIMAL_COMMA.fullmatch(w) and any(c.isdigit() for c in w) for w in words
        )  # fmt: skip

    def parse(line: str, lineno: int) -> list[float]:
        nonlocal comma_decimal, commas_seen
        line = line.replace('"', "")  # quoted values (pandas' QUOTE_ALL)
        if comma_decimal is None:
            words = line.replace(";", " ").split()
            comma_decimal = ";" in line or decimal_commas(words)
            grouped = [w for w in words if _GROUPED.fullmatch(w)]
            if not comma_decimal and grouped:
                raise _Grouped(path, (
                    f"line {lineno}: {grouped[0]!r} has a thousands separator: commas would "
                    "split it into two values; write the values without them (1234.5)"
                ))  # fmt: skip
        elif not comma_decimal and not commas_seen and "," in line:
            words = line.replace(";", " ").split()
            if decimal_commas(words) and len(words) == width:
                comma_decimal = True  # the rows before had no comma: decimals from here on
            commas_seen = True
        try:
            if comma_decimal:
                if ambiguous[0] is not False:  # until one value settles it (0,342 or 1,5)
                    commas = [w for w in line.replace(";", " ").split() if "," in w]
                    if commas and all(_THOUSANDS.fullmatch(w) for w in commas):
                        ambiguous[0] = ambiguous[0] or (lineno, line.strip())
                    elif commas:
                        ambiguous[0] = False
                return [float(v.replace(",", ".")) for v in line.replace(";", " ").split()]
            return [float(v) for v in line.replace(",", " ").replace(";", " ").split()]
        except ValueError as exc:
            raise CorruptFileError(path, f"line {lineno}: non-numeric value ({exc})") from exc

    values = array("d")

    def add(row: list[float], lineno: int, line: str = "") -> None:
        nonlocal width
        if not width:
            width = len(row)
        elif len(row) != width:
            grouped = [w for w in line.replace(";", " ").split() if _GROUPED.fullmatch(w)]
            raise CorruptFileError(path, (
                f"line {lineno}: {len(row)} values, where the rows before have {width}"
                + (" (a value with a thousands separator, "
                   f"{grouped[0]!r}: write the values without them)" if grouped else "")
            ))  # fmt: skip
        values.extend(row)

    header: list[str] | None = None
    seen = False  # a data line (or the header) was read
    try:
        with open(path, encoding="utf-8-sig") as handle:
            for lineno, line in enumerate(handle, start=1):
                text = line.partition("#")[0].strip()
                if not text and not seen and line.lstrip().startswith("#"):
                    header = _commented_header(line.strip().lstrip("#"))
                    seen = header is not None
                    continue
                if not text:
                    continue
                if not seen:  # the first line may be a header (column names)
                    seen = True
                    try:
                        add(parse(text, lineno), lineno, text)
                    except _Grouped:
                        raise
                    except CorruptFileError:  # the header
                        comma_decimal = None
                        header = _header_words(text.replace('"', ""))
                    continue
                add(parse(text, lineno), lineno, text)
    except UnicodeDecodeError as exc:
        with open(path, "rb") as handle:
            check_text_encoding(path, handle.read(4))
        raise CorruptFileError(path, "not a text file (invalid UTF-8)") from exc
    if not seen:
        raise EmptyCloudError(path, "point cloud is empty (no data lines)")
    if not values:
        raise EmptyCloudError(path, "point cloud is empty (only a header line)")
    if ambiguous[0]:
        lineno, line = ambiguous[0]
        raise CorruptFileError(
            path, f"line {lineno}: {line!r}: every comma in the file may be a decimal comma "
            "or a thousands separator; write the values with points (1234.5 or 1.2345)"
        )  # fmt: skip
    table = np.frombuffer(values, dtype=np.float64).reshape(-1, width)
    columns = None if header is None else _axis_columns(path, header, width)
    return table if columns is None else table[:, columns]
