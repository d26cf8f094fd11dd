"""Strict parsers of the point-cloud formats with a header: PLY, PCD and LAS/LAZ.

Each reader returns the file's x, y, z as an ``(N, 3) float64`` array (values stored as
float32 or integers convert exactly) or raises :class:`pcreg.errors.CorruptFileError` with a
one-line message ``"<path>: <problem>"``. They never pad, never guess and never print:

* the point count of the header is checked against the data actually present, before
  anything is allocated; a truncated file, a short or long ASCII row, a non-numeric token or
  a missing row is an error naming what is wrong (and, for text, the line);
* x, y and z are taken by name, whatever type the header declares for them;
* other elements of a PLY file (the faces of a mesh, before or after the vertices) are walked
  over and checked for size, not read;
* non-finite values (``nan``, ``inf``, ``1e999``) are returned as such, for
  :func:`pcreg.io.validate_points` to refuse or drop.

PLY and PCD are parsed with numpy here rather than by Open3D, whose readers zero-pad
truncated or corrupt files (sometimes with uninitialised rows), print to stderr and still
return a cloud. Binary-compressed PCD is decompressed here too (LZF), and its declared sizes
are checked. LAS/LAZ go through laspy, with the header's scales and offsets and its point
count checked and laspy's warnings and log records kept off the terminal.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import struct
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pcreg.errors import CorruptFileError

__all__ = ["lzf_decompress", "read_las", "read_pcd", "read_ply", "write_ply"]

_AXES = ("x", "y", "z")


def _one_line(text: object, limit: int = 200) -> str:
    """``text`` on one line, shortened to ``limit`` characters."""
    out = " ".join(str(text).split())
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CorruptFileError(path, f"cannot be read ({_one_line(exc.strerror or exc)})") from exc


def _decode_header(path: Path, raw: bytes, fmt: str) -> list[str]:
    """The lines of a header (split at "\\n" only, so that line numbers match the body's)."""
    try:
        return raw.decode("ascii").split("\n")
    except UnicodeDecodeError:
        raise CorruptFileError(path, f"{fmt} header is not ASCII text: corrupt") from None


def _count(path: Path, text: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise CorruptFileError(path, f"{what} {text!r} is not an integer") from None
    if value < 0:
        raise CorruptFileError(path, f"{what} is negative ({value})")
    return value


# --------------------------------------------------------------------------- text bodies
def _body_lines(body: bytes) -> list[bytes]:
    """The lines of a text body, without the trailing blank ones."""
    lines = body.split(b"\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _token_counts(text: bytes, lines: int) -> np.ndarray:
    """The number of whitespace-separated tokens on each of the ``lines`` lines of ``text``
    (``bytes.split`` semantics), without a Python loop."""
    buf = np.frombuffer(text, np.uint8)
    space = np.zeros(256, bool)
    space[list(b" \t\n\r\x0b\x0c")] = True
    blank = space[buf]
    starts = ~blank
    starts[1:] &= blank[:-1]
    line = np.searchsorted(np.flatnonzero(buf == ord("\n")), np.flatnonzero(starts))
    return np.bincount(line, minlength=lines)[:lines]


def _check_widths(path: Path, lines: list[bytes], first_line: int, width: int, what: str):
    """CorruptFileError unless every line has ``width`` tokens; the lines joined by "\\n"."""
    text = b"\n".join(lines)
    counts = _token_counts(text, len(lines))
    wrong = np.flatnonzero(counts != width)
    if len(wrong):
        i = int(wrong[0])
        raise CorruptFileError(
            path,
            f"line {first_line + i}: expected {width} values in a {what} row, "
            f"found {int(counts[i])}: corrupt or truncated",
        )
    return text


def _parse_rows(
    path: Path, lines: list[bytes], first_line: int, width: int, what: str
) -> np.ndarray:
    """``(len(lines), width) float64`` from text rows of exactly ``width`` numbers each.

    ``first_line`` is the 1-based line number of ``lines[0]`` in the file, for messages.
    """
    text = _check_widths(path, lines, first_line, width, what)
    tokens = text.split()
    try:
        if b"_" in text:  # float() would read "1_5" as 15
            raise ValueError
        return np.array(tokens, dtype=np.bytes_).astype(np.float64).reshape(len(lines), width)
    except ValueError:
        for k, token in enumerate(tokens):
            try:
                if b"_" in token:
                    raise ValueError
                float(token)
            except ValueError:
                raise CorruptFileError(
                    path,
                    f"line {first_line + k // width}: non-numeric value "
                    f"{_one_line(token.decode('latin-1'), 40)!r} in a {what} row",
                ) from None
        raise  # pragma: no cover - astype and float() agree on what is a number


# --------------------------------------------------------------------------- PLY
_PLY_TYPES = {
    "char": "i1", "int8": "i1", "uchar": "u1", "uint8": "u1",
    "short": "i2", "int16": "i2", "ushort": "u2", "uint16": "u2",
    "int": "i4", "int32": "i4", "uint": "u4", "uint32": "u4",
    "float": "f4", "float32": "f4", "double": "f8", "float64": "f8",
}  # fmt: skip
_PLY_FORMATS = {"ascii": None, "binary_little_endian": "<", "binary_big_endian": ">"}
_PLY_END = re.compile(rb"^end_header[ \t\r]*$", re.MULTILINE)


@dataclass
class _PlyProperty:
    name: str
    type: str  # numpy type code without byte order, e.g. "f4"
    count_type: str | None = None  # a list property: the type of its length field

    @property
    def size(self) -> int:
        return np.dtype(self.type).itemsize


@dataclass
class _PlyElement:
    name: str
    count: int
    properties: list[_PlyProperty] = field(default_factory=list)

    @property
    def fixed(self) -> bool:
        return all(p.count_type is None for p in self.properties)


def _ply_header(path: Path, data: bytes) -> tuple[str, list[_PlyElement], int, int]:
    """(format, elements, offset of the body, lines in the header) of a PLY file."""
    if not data:
        raise CorruptFileError(path, "file is empty (0 bytes)")
    first = data[:5].split(b"\n")[0].strip()
    if first != b"ply":
        raise CorruptFileError(path, "not a PLY file (missing 'ply' magic in the header)")
    end = _PLY_END.search(data)
    if end is None:
        raise CorruptFileError(path, "no complete PLY header (no end_header line): truncated")
    body = end.end() + 1 if data[end.end() : end.end() + 1] == b"\n" else end.end()
    lines = _decode_header(path, data[: end.start()], "PLY")[:-1]  # ends with "\\n"
    fmt = None
    elements: list[_PlyElement] = []
    for number, line in enumerate(lines[1:], start=2):
        parts = line.split()
        where = f"PLY header line {number}"
        if not parts or parts[0] in ("comment", "obj_info"):
            continue
        if parts[0] == "format":
            if fmt is not None or len(parts) != 3 or parts[1] not in _PLY_FORMATS:
                raise CorruptFileError(path, f"{where}: bad format line {_one_line(line)!r}")
            if parts[2] != "1.0":
                raise CorruptFileError(path, f"{where}: unsupported PLY version {parts[2]!r}")
            fmt = parts[1]
        elif parts[0] == "element" and len(parts) == 3:
            if any(e.name == parts[1] for e in elements):
                raise CorruptFileError(path, f"{where}: element {parts[1]!r} declared twice")
            elements.append(_PlyElement(parts[1], _count(path, parts[2], f"{where}: count")))
        elif parts[0] == "property" and len(parts) in (3, 5):
            if not elements:
                raise CorruptFileError(path, f"{where}: property before any element")
            types = parts[2:4] if parts[1] == "list" else parts[1:2]
            if (parts[1] == "list") != (len(parts) == 5) or any(t not in _PLY_TYPES for t in types):
                raise CorruptFileError(path, f"{where}: bad property {_one_line(line)!r}")
            prop = _PlyProperty(parts[-1], _PLY_TYPES[types[-1]])
            if parts[1] == "list":
                prop.count_type = _PLY_TYPES[types[0]]
                if prop.count_type[0] == "f":
                    raise CorruptFileError(path, f"{where}: a list length cannot be {types[0]}")
            if any(p.name == prop.name for p in elements[-1].properties):
                raise CorruptFileError(path, f"{where}: property {prop.name!r} declared twice")
            elements[-1].properties.append(prop)
        else:
            raise CorruptFileError(path, f"{where}: unexpected {_one_line(line, 60)!r}")
    if fmt is None:
        raise CorruptFileError(path, "PLY header has no format line")
    vertex = next((e for e in elements if e.name == "vertex"), None)
    if vertex is None:
        raise CorruptFileError(path, "PLY header declares no 'vertex' element")
    for axis in _AXES:
        prop = next((p for p in vertex.properties if p.name == axis), None)
        if prop is None:
            raise CorruptFileError(path, f"PLY vertex element has no {axis!r} property")
        if prop.count_type is not None:
            raise CorruptFileError(path, f"PLY vertex property {axis!r} is a list")
    return fmt, elements, body, len(lines) + 1


def _ply_binary_rows(
    path: Path, data: bytes, offset: int, element: _PlyElement, order: str
) -> tuple[int, np.ndarray, dict[int, np.ndarray]]:
    """Walk the rows of a binary element with list properties.

    Returns (end offset, row start offsets, {property index: list lengths per row}).
    """
    n = element.count
    lists = [i for i, p in enumerate(element.properties) if p.count_type is not None]

    def truncated(at: int) -> CorruptFileError:
        return CorruptFileError(
            path,
            f"PLY element {element.name!r} ({n} rows) runs past the end of the file "
            f"at byte {at} of {len(data)}: truncated",
        )

    least = sum(np.dtype(p.count_type or p.type).itemsize for p in element.properties)
    if offset + n * least > len(data):  # before allocating anything per row
        raise CorruptFileError(
            path,
            f"PLY header declares {n} {element.name} rows (at least {n * least} bytes) but "
            f"only {len(data) - offset} bytes follow: truncated or corrupt",
        )
    codes = {"i1": "b", "u1": "B", "i2": "h", "u2": "H", "i4": "i", "u4": "I"}

    def length(at: int, prop: _PlyProperty) -> int:
        code = order + codes[prop.count_type]
        size = struct.calcsize(code)
        if at + size > len(data):
            raise truncated(at + size)
        (value,) = struct.unpack_from(code, data, at)
        if value < 0:
            raise CorruptFileError(path, f"negative list length {value} at byte {at}: corrupt")
        return value

    # Fast path: every row has the lengths of the first row (e.g. a mesh of triangles).
    if n:
        counts, row = {}, 0
        for i, prop in enumerate(element.properties):
            if prop.count_type is None:
                row += prop.size
            else:
                counts[i] = length(offset + row, prop)
                row += np.dtype(prop.count_type).itemsize + counts[i] * prop.size
        if offset + n * row <= len(data):
            same, at = True, 0
            for i, prop in enumerate(element.properties):
                if prop.count_type is None:
                    at += prop.size
                    continue
                code = np.dtype(order + prop.count_type)
                got = np.ndarray((n,), code, data, offset + at, (row,))
                same = same and bool((got == counts[i]).all())
                at += code.itemsize + counts[i] * prop.size
            if same:
                starts = offset + row * np.arange(n, dtype=np.int64)
                return offset + n * row, starts, {i: np.full(n, c) for i, c in counts.items()}
    # Rows of different lengths: walk them one by one.
    starts = np.empty(n, np.int64)
    lengths = {i: np.empty(n, np.int64) for i in lists}
    at = offset
    for r in range(n):
        starts[r] = at
        for i, prop in enumerate(element.properties):
            if prop.count_type is None:
                at += prop.size
            else:
                lengths[i][r] = k = length(at, prop)
                at += np.dtype(prop.count_type).itemsize + k * prop.size
        if at > len(data):
            raise truncated(at)
    return at, starts, lengths


def _ply_binary(path: Path, data: bytes, fmt: str, elements: list[_PlyElement], body: int):
    order = _PLY_FORMATS[fmt]
    offset, xyz = body, None
    for element in elements:
        props = element.properties
        if element.fixed:
            row = sum(p.size for p in props)
            end = offset + element.count * row
            if end > len(data):
                raise CorruptFileError(
                    path,
                    f"PLY header declares {element.count} {element.name} rows ({end - offset} "
                    f"bytes) but only {len(data) - offset} bytes follow: truncated or corrupt",
                )
            if element.name == "vertex":
                at = {p.name: sum(q.size for q in props[:i]) for i, p in enumerate(props)}
                layout = np.dtype(
                    {
                        "names": list(_AXES),
                        "formats": [
                            order + next(p.type for p in props if p.name == a) for a in _AXES
                        ],
                        "offsets": [at[a] for a in _AXES],
                        "itemsize": row,
                    }
                )
                table = np.frombuffer(data, layout, element.count, offset)
                xyz = np.stack([table[a].astype(np.float64) for a in _AXES], axis=1)
            offset = end
            continue
        end, starts, lengths = _ply_binary_rows(path, data, offset, element, order)
        if element.name == "vertex":  # lists among the vertex properties: gather x, y, z
            raw = np.frombuffer(data, np.uint8)
            columns = []
            for axis in _AXES:
                shift = np.zeros(element.count, np.int64)
                for i, prop in enumerate(props):
                    if prop.name == axis:
                        break
                    if prop.count_type is None:
                        shift += prop.size
                    else:
                        shift += np.dtype(prop.count_type).itemsize + lengths[i] * prop.size
                size = prop.size
                picked = raw[(starts + shift)[:, None] + np.arange(size)]
                column = picked.copy().view(order + prop.type).reshape(-1)
                columns.append(column.astype(np.float64))
            xyz = np.stack(columns, axis=1) if columns else None
        offset = end
    extra = data[offset:]
    if extra.strip():
        raise CorruptFileError(
            path,
            f"{len(extra)} bytes follow the last PLY element: the header's counts do not "
            "match the data (corrupt)",
        )
    assert xyz is not None
    return xyz


def _ascii_width(element: _PlyElement, tokens: list[bytes]) -> int | None:
    """The number of tokens a row of ``element`` must have, given its tokens (None when a
    list length is not an integer)."""
    width, at = 0, 0
    for prop in element.properties:
        if prop.count_type is None:
            width += 1
            at += 1
            continue
        try:
            k = int(tokens[at])
        except (IndexError, ValueError):
            return None
        if k < 0:
            return None
        width += 1 + k
        at += 1 + k
    return width


def _ply_ascii(path: Path, data: bytes, elements: list[_PlyElement], body: int, first: int):
    """x, y, z of an ASCII PLY body (one row per line; ``first`` is the body's line number)."""
    lines = _body_lines(data[body:])
    xyz, at = None, 0
    for element in elements:
        block = lines[at : at + element.count]
        if element.fixed and element.name == "vertex":
            table = _parse_rows(path, block, first + at, len(element.properties), "vertex")
            names = [p.name for p in element.properties]
            xyz = table[:, [names.index(a) for a in _AXES]]
        elif element.fixed:  # check the widths only
            _check_widths(path, block, first + at, len(element.properties), element.name)
        else:  # list properties: walk the rows (and pick x, y, z of a vertex)
            picked = []
            for i, line in enumerate(block):
                tokens = line.split()
                if _ascii_width(element, tokens) != len(tokens):
                    raise CorruptFileError(
                        path,
                        f"line {first + at + i}: malformed {element.name} row "
                        f"{_one_line(line.decode('latin-1'), 60)!r}: corrupt or truncated",
                    )
                if element.name == "vertex":
                    values, k = {}, 0
                    for prop in element.properties:
                        values[prop.name] = tokens[k]
                        k += 1 if prop.count_type is None else 1 + int(tokens[k])
                    picked.append(b" ".join(values[a] for a in _AXES))
            if element.name == "vertex":
                xyz = _parse_rows(path, picked, first + at, 3, "vertex")
        if len(block) < element.count:
            counts = ", ".join(f"{e.count} {e.name}" for e in elements)
            raise CorruptFileError(
                path,
                f"PLY header declares {sum(e.count for e in elements)} rows ({counts}) but "
                f"only {len(lines)} lines follow it: truncated or corrupt",
            )
        at += element.count
    if len(lines) > at:
        raise CorruptFileError(
            path,
            f"{len(lines) - at} lines follow the last PLY element (line {first + at} on): "
            "the header's counts do not match the data (corrupt)",
        )
    assert xyz is not None
    return xyz


def read_ply(path: Path) -> np.ndarray:
    """x, y, z of the vertices of a PLY file (ASCII or binary, point cloud or mesh) as
    ``(N, 3) float64``; CorruptFileError for anything inconsistent."""
    data = _read_bytes(path)
    fmt, elements, body, header_lines = _ply_header(path, data)
    if fmt == "ascii":
        return _ply_ascii(path, data, elements, body, header_lines + 1)
    return _ply_binary(path, data, fmt, elements, body)


def write_ply(path: Path, xyz: np.ndarray, dtype: np.dtype) -> None:
    """Write ``xyz (N, 3)`` as a binary little-endian PLY with ``float`` or ``double``
    coordinates (``dtype`` float32 or float64)."""
    kind = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}[np.dtype(dtype)]
    header = "\n".join(
        ["ply", "format binary_little_endian 1.0", "comment written by pcreg",
         f"element vertex {len(xyz)}", *(f"property {kind} {a}" for a in _AXES), "end_header"]
    )  # fmt: skip
    with open(path, "wb") as handle:
        handle.write(header.encode("ascii") + b"\n")
        handle.write(np.ascontiguousarray(xyz, np.dtype(dtype).newbyteorder("<")).tobytes())


# --------------------------------------------------------------------------- PCD
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


def _pcd_header(path: Path, data: bytes) -> tuple[str, list[_PcdField], int, int, int]:
    """(data kind, fields, points, offset of the body, lines in the header) of a PCD file."""
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
    if points is not None:
        if width is not None and width * height != points:
            raise CorruptFileError(
                path, f"PCD header: WIDTH {width} x HEIGHT {height} != POINTS {points}: corrupt"
            )
    elif width is not None:
        points = width * height
    if points is None:
        raise CorruptFileError(path, "PCD header has neither POINTS nor WIDTH")
    return kind, fields, points, body, len(lines)


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


def read_pcd(path: Path) -> np.ndarray:
    """x, y, z of a PCD file (DATA ascii, binary or binary_compressed) as ``(N, 3) float64``;
    CorruptFileError for anything inconsistent."""
    data = _read_bytes(path)
    kind, fields, points, body, header_lines = _pcd_header(path, data)
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
        if data[body + points * row :].strip(b"\0"):  # old PCL writers pad with zeros
            raise CorruptFileError(
                path,
                f"{have - points * row} bytes follow the {points} points the header declares: "
                "corrupt",
            )

        def column(f: _PcdField) -> np.ndarray:
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


def read_las(path: Path) -> np.ndarray:
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
    return xyz.astype(np.float64, copy=False)
