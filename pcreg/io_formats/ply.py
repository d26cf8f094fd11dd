"""PLY (ascii, binary little / big endian): vertices by property name, other elements walked
over and size-checked; the writer of :func:`pcreg.io.write_points`."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pcreg.errors import CorruptFileError
from pcreg.io_formats._common import (
    _AXES,
    RawCloud,
    _body_lines,
    _check_widths,
    _count,
    _decode_header,
    _one_line,
    _parse_rows,
    _read_bytes,
)

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


def read_ply(path: Path) -> RawCloud:
    """x, y, z of the vertices of a PLY file (ASCII or binary, point cloud or mesh) as
    ``(N, 3) float64``, NaN kept; CorruptFileError for anything inconsistent."""
    data = _read_bytes(path)
    fmt, elements, body, header_lines = _ply_header(path, data)
    faces = sum(e.count for e in elements if e.name == "face")
    if fmt == "ascii":
        xyz = _ply_ascii(path, data, elements, body, header_lines + 1)
    else:
        xyz = _ply_binary(path, data, fmt, elements, body)
    return RawCloud(xyz, faces=faces)


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
