"""PCD (ascii, binary, binary_compressed with LZF): fields by name, counts checked against
WIDTH x HEIGHT and the data present."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pcreg.errors import CorruptFileError
from pcreg.io_formats._common import (
    _AXES,
    RawCloud,
    _body_lines,
    _count,
    _decode_header,
    _one_line,
    _parse_rows,
    _read_bytes,
    organized_zeros,
)

_PCD_KEYS = ("VERSION", "FIELDS", "SIZE", "TYPE", "COUNT", "WIDTH", "HEIGHT", "VIEWPOINT",
             "POINTS", "DATA")  # fmt: skip
_PCD_DATA = re.compile(rb"^[ \t]*DATA[ \t]+(\S+)[ \t\r]*$", re.MULTILINE | re.IGNORECASE)


@dataclass
class _PcdField:
    name: str
    type: str  # numpy type code without byte order
    count: int

    @property
    def size(self) -> int:
        return np.dtype(self.type).itemsize * self.count


def _pcd_header(
    path: Path, data: bytes
) -> tuple[str, list[_PcdField], int, int, int, tuple[int, int]]:
    """(data kind, fields, points, offset of the body, lines in the header, (height, width))
    of a PCD file."""
    if not data:
        raise CorruptFileError(path, "file is empty (0 bytes)")
    start = data[:256].lstrip()
    if not (start.startswith(b"#") or start[:7].upper() in (b"VERSION", b"FIELDS ")):
        raise CorruptFileError(path, "not a PCD file (header does not start with '#' or VERSION)")
    end = _PCD_DATA.search(data)
    if end is None:
        raise CorruptFileError(path, "no complete PCD header (no DATA line): truncated")
    body = end.end() + 1 if data[end.end() : end.end() + 1] == b"\n" else end.end()
    lines = _decode_header(path, data[: end.end()], "PCD")
    keys: dict[str, list[str]] = {}
    for number, line in enumerate(lines, start=1):
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        key = parts[0].upper()
        if key not in _PCD_KEYS:
            raise CorruptFileError(
                path, f"PCD header line {number}: unexpected {_one_line(line, 60)!r}"
            )
        if key in keys:
            raise CorruptFileError(path, f"PCD header line {number}: {key} given twice")
        keys[key] = parts[1:]
    kind = keys["DATA"][0].lower()
    if kind not in ("ascii", "binary", "binary_compressed"):
        raise CorruptFileError(path, f"unknown PCD DATA kind {keys['DATA'][0]!r}")
    names = keys.get("FIELDS") or []
    if not names:
        raise CorruptFileError(path, "PCD header has no FIELDS")
    sizes, types = keys.get("SIZE", []), keys.get("TYPE", [])
    counts = keys.get("COUNT", ["1"] * len(names))
    if not len(names) == len(sizes) == len(types) == len(counts):
        raise CorruptFileError(
            path,
            f"PCD header lists {len(names)} FIELDS but {len(sizes)} SIZE, {len(types)} TYPE "
            f"and {len(counts)} COUNT entries",
        )
    fields = []
    for name, size, type_, count in zip(names, sizes, types, counts, strict=True):
        code = {"F": "f", "I": "i", "U": "u"}.get(type_.upper(), "?") + size
        if code not in ("f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"):
            raise CorruptFileError(
                path, f"PCD field {name!r}: unsupported TYPE {type_} SIZE {size}"
            )
        n = _count(path, count, f"PCD COUNT of field {name!r}")
        if n == 0:
            raise CorruptFileError(path, f"PCD COUNT of field {name!r} is 0")
        fields.append(_PcdField(name, code, n))
    for axis in _AXES:
        if sum(f.name == axis for f in fields) != 1:
            raise CorruptFileError(
                path, f"PCD FIELDS must name {axis!r} once, got {' '.join(names)!r}"
            )

    def number(key: str) -> int | None:
        if key not in keys:
            return None
        if len(keys[key]) != 1:
            raise CorruptFileError(path, f"PCD header: {key} needs one value, got {keys[key]}")
        return _count(path, keys[key][0], f"PCD {key}")

    width, height, points = number("WIDTH"), number("HEIGHT"), number("POINTS")
    height = 1 if height is None else height
    if points and width is not None and width * height == 0:
        # Some vendors' tools write "WIDTH 0 / HEIGHT 0 / POINTS n": the count is given once,
        # and the data (checked against it by the caller) decides; an unorganised cloud.
        width, height = points, 1
    if points is not None:
        if width is not None and width * height != points:
            raise CorruptFileError(
                path, f"PCD header: WIDTH {width} x HEIGHT {height} != POINTS {points}: corrupt"
            )
    elif width is not None:
        points = width * height
    if points is None:
        raise CorruptFileError(path, "PCD header has neither POINTS nor WIDTH")
    shape = (height, points // height if height else points) if width is None else (height, width)
    return kind, fields, points, body, len(lines), shape


def lzf_decompress(src: bytes, size: int) -> bytes:
    """LZF-decompress ``src`` (the format of PCL's binary_compressed PCD) into exactly
    ``size`` bytes; ValueError when the stream is malformed or has another length."""
    out = bytearray(size)
    ip = op = 0
    end = len(src)
    while ip < end:
        ctrl = src[ip]
        ip += 1
        if ctrl < 32:  # a literal run of ctrl + 1 bytes
            n = ctrl + 1
            if ip + n > end or op + n > size:
                raise ValueError(f"literal run past the end at input byte {ip}")
            out[op : op + n] = src[ip : ip + n]
            ip += n
            op += n
            continue
        n = ctrl >> 5
        if n == 7:
            if ip >= end:
                raise ValueError("back-reference cut short")
            n += src[ip]
            ip += 1
        if ip >= end:
            raise ValueError("back-reference cut short")
        ref = op - ((ctrl & 0x1F) << 8) - src[ip] - 1
        ip += 1
        n += 2
        if ref < 0 or op + n > size:
            raise ValueError(f"back-reference out of range at input byte {ip}")
        if ref + n <= op:
            out[op : op + n] = out[ref : ref + n]
        else:  # overlapping: repeats the last op - ref bytes
            period = bytes(out[ref:op])
            out[op : op + n] = (period * (n // len(period) + 1))[:n]
        op += n
    if op != size:
        raise ValueError(f"decompresses to {op} bytes, the header says {size}")
    return bytes(out)


def _pcd_fields(fields: list[_PcdField], columns) -> np.ndarray:
    """x, y, z (the first element of a field with COUNT > 1) from ``columns(field)``."""
    out = []
    for axis in _AXES:
        field_ = next(f for f in fields if f.name == axis)
        out.append(np.asarray(columns(field_), dtype=np.float64))
    return np.stack(out, axis=1)


def read_pcd(path: Path) -> RawCloud:
    """x, y, z of a PCD file (DATA ascii, binary or binary_compressed) as ``(N, 3) float64``,
    NaN kept; an organised cloud (HEIGHT > 1) has its ``(0, 0, 0)`` pixels marked invalid.
    CorruptFileError for anything inconsistent."""
    data = _read_bytes(path)
    if data.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark (an editor's save)
        data = data[3:]
    kind, fields, points, body, header_lines, (height, width) = _pcd_header(path, data)
    xyz = _read_pcd_xyz(path, data, kind, fields, points, body, header_lines)
    organized = (height, width) if height > 1 else None
    marked = organized_zeros(xyz, height, width)
    return RawCloud(xyz, marked, "(0, 0, 0) pixels of the organised cloud", organized)


def _read_pcd_xyz(
    path: Path,
    data: bytes,
    kind: str,
    fields: list[_PcdField],
    points: int,
    body: int,
    header_lines: int,
) -> np.ndarray:
    row = sum(f.size for f in fields)
    offsets = {f.name: sum(g.size for g in fields[:i]) for i, f in enumerate(fields)}
    if kind == "ascii":
        lines = _body_lines(data[body:])
        width = sum(f.count for f in fields)
        table = _parse_rows(path, lines[:points], header_lines + 1, width, "point")
        if len(lines) != points:
            raise CorruptFileError(
                path,
                f"PCD header declares {points} points but {len(lines)} data lines follow: "
                + ("truncated or corrupt" if len(lines) < points else "corrupt"),
            )
        column = {f.name: sum(g.count for g in fields[:i]) for i, f in enumerate(fields)}
        return _pcd_fields(fields, lambda f: table[:, column[f.name]])
    if kind == "binary":
        have = len(data) - body
        if have < points * row:
            raise CorruptFileError(
                path,
                f"PCD header declares {points} points ({points * row} bytes) but only {have} "
                "bytes follow: truncated or corrupt",
            )
        rest = data[body + points * row :]
        # old PCL writers pad with zeros; some writers end the file with a line break
        if rest.strip(b"\0") and (len(rest) >= row or rest.strip(b" \t\r\n")):
            raise CorruptFileError(
                path,
                f"{have - points * row} bytes follow the {points} points the header declares: "
                "corrupt",
            )

        def column(f: _PcdField) -> np.ndarray:
            if not points:  # no data: an offset past the end of the file is no array
                return np.empty(0, "<" + f.type)
            strides = (row,)
            return np.ndarray((points,), "<" + f.type, data, body + offsets[f.name], strides)

        return _pcd_fields(fields, column)
    # binary_compressed: two uint32 (compressed and raw sizes), then LZF; fields stored
    # one after another (all x, then all y, ...).
    if len(data) - body < 8:
        raise CorruptFileError(path, "binary_compressed PCD data is missing its sizes: truncated")
    packed, raw_size = struct.unpack_from("<II", data, body)
    if raw_size != points * row:
        raise CorruptFileError(
            path,
            f"binary_compressed PCD unpacks to {raw_size} bytes but {points} points of "
            f"{row} bytes need {points * row}: corrupt",
        )
    if body + 8 + packed > len(data):
        raise CorruptFileError(
            path,
            f"binary_compressed PCD data is {packed} bytes but only {len(data) - body - 8} "
            "follow: truncated",
        )
    try:
        raw = lzf_decompress(data[body + 8 : body + 8 + packed], raw_size) if raw_size else b""
    except ValueError as exc:
        raise CorruptFileError(path, f"binary_compressed PCD data is corrupt ({exc})") from exc

    def soa(f: _PcdField) -> np.ndarray:
        start = points * offsets[f.name]
        return np.ndarray((points,), "<" + f.type, raw, start, (f.size,))

    return _pcd_fields(fields, soa)


# --------------------------------------------------------------------------- LAS / LAZ
