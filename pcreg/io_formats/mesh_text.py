"""OBJ and OFF meshes parsed by pcreg: every vertex, and polygons of any size as triangles.

Open3D's reader (tinyobjloader for OBJ) was found to drop what a user's file holds: an OBJ
whose faces are quads (Blender's default export) came back as only its triangles, the cube of
2 triangles and 5 quads as "4 vertices and 2 triangles", and an OBJ of ``v`` lines alone, or an
OFF without faces, as no vertices at all. Both formats are plain text, so they are read here:

* OBJ: ``v x y z [w | r g b]`` lines are the vertices, all of them (referenced or not);
  ``f`` lines are polygons of 1-based indices (into all the file's vertices), negative ones
  counting back from the last vertex read, each corner ``v``, ``v/vt``, ``v/vt/vn`` or
  ``v//vn``; a polygon of k corners is fanned into k - 2 triangles. Every other statement
  (``vt``, ``vn``, ``o``, ``g``, ``usemtl``, ``l``, ...) is ignored.
* OFF (also ``COFF``, ``NOFF``, ``CNOFF``, ``STOFF``, and Geomview's ``nOFF`` of 3-D
  vertices): the header word, the counts (on its line or the next), then the declared
  vertices and faces (``k i1 ... ik [colour]``). Fewer lines than declared is a truncated
  file. Binary OFF, 4-D OFF and UTF-16 text are refused by name.
"""

from __future__ import annotations

import io
import re
import warnings
from array import array
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from pcreg.errors import CorruptFileError
from pcreg.io_formats._common import check_text_encoding

__all__ = ["read_obj", "read_off"]

#: OBJ faces turned into triangles this many lines at a time (the per-corner arrays of a
#: block: about 100 MB for quads)
FACE_BLOCK = 500_000


def _plain(data: bytes) -> bytes:
    """The file's text as its parsers read it: a UTF-8 byte-order mark left out, old Mac
    line ends (``\\r`` alone, in all the file or beside Windows' ``\\r\\n``: a lone one
    joined two vertex lines into one, and the second vertex was lost) made ``\\n``, and OBJ's
    backslash line continuations joined (copies are made only where one of these is
    present)."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if b"\\\n" in data or b"\\\r\n" in data:
        data = data.replace(b"\\\r\n", b" ").replace(b"\\\n", b" ")
    return data


def _lines(data: bytes) -> Iterator[tuple[int, list[bytes]]]:
    """``(line number, words)`` of each line with words, ``#`` comments left out; one line at
    a time (a list of the file's lines would take several times its size)."""
    for lineno, line in enumerate(io.BytesIO(_plain(data)), start=1):
        words = line.split(b"#", 1)[0].split()
        if words:
            yield lineno, words


def _numbers(text: bytes, dtype) -> np.ndarray:
    """The whitespace-separated numbers of ``text`` in one pass (C's strtod: "1_0" is not a
    number, as ``float`` would have it); empty, or short, where one is not a number (numpy
    2.3 on raises there, older ones stop early: the callers compare the length)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "could not be read to its end"
            return np.fromstring(text, dtype=dtype, sep=" ")
    except ValueError:
        return np.zeros(0, dtype)


def _vertices(path: Path, rows: list[bytes], lines: array) -> np.ndarray:
    """``(V, 3) float64`` of the first three words of each row (a ``w`` or colour after them
    is left out); a row that does not start with three plain numbers is named by its line."""
    values = _numbers(b" ".join(rows), np.float64)
    if values.size == 3 * len(rows):
        return values.reshape(-1, 3)
    out = np.empty((len(rows), 3))
    for k, (row, lineno) in enumerate(zip(rows, lines, strict=True)):
        words = row.split()[:3]
        try:
            if len(words) < 3 or any(b"_" in w for w in words):
                raise ValueError
            out[k] = [float(w) for w in words]
        except ValueError:
            raise CorruptFileError(
                path, f"line {lineno}: a vertex is not three numbers: {row.decode('latin-1')!r}"
            ) from None
    return out


def _obj_faces(
    path: Path, rows: list[bytes], lines: array, defined: array
) -> tuple[np.ndarray, tuple[int, int]]:
    """``(F, 3) int64`` triangles of OBJ face rows (the words after ``f``), each defined
    after ``defined[k]`` vertices (a negative index counts back from there), fanned; and
    the highest vertex they refer to with its line (checked against the file's count once
    all its vertices are read)."""
    counts = np.fromiter((len(r.split()) for r in rows), np.int64, len(rows))
    text = re.sub(rb"/\S*", b"", b" ".join(rows))  # 'v/vt/vn' -> 'v'
    index = _numbers(text, np.int64)
    if index.size != counts.sum() or re.search(rb"[^\s0-9+-]|\d{19}", text):
        index = np.zeros(0, np.int64)
        for row, lineno in zip(rows, lines, strict=True):  # name the line
            for word in row.split():
                try:
                    value = int(word.split(b"/", 1)[0])
                except ValueError:
                    raise CorruptFileError(
                        path, f"line {lineno}: a face corner is not an index: {word!r}"
                    ) from None
                if abs(value) >= 2**63:  # numpy had clamped it to 2**63 - 1
                    raise CorruptFileError(path, (
                        f"line {lineno}: a face refers to vertex {word.decode('latin-1')}, "
                        "past any file's vertices: corrupt"
                    ))  # fmt: skip
        # every corner an index within int64 (19 digits, say): parsed one by one
        index = np.array([int(w.split(b"/", 1)[0]) for r in rows for w in r.split()], np.int64)
    small = np.flatnonzero(counts < 3)
    if small.size:
        raise CorruptFileError(path, f"line {lines[small[0]]}: a face needs 3 corners or more")
    face = np.repeat(np.arange(len(rows)), counts)
    before = np.frombuffer(defined, dtype=np.int64)[face]
    # a positive index counts from the file's first vertex (readers accept a face before
    # its vertices), a negative one back from the last vertex read before the face
    resolved = np.where(index > 0, index - 1, before + index)
    bad = np.flatnonzero((index == 0) | (resolved < 0))
    if bad.size:
        k = int(bad[0])
        raise CorruptFileError(
            path,
            f"line {lines[face[k]]}: a face refers to vertex {index[k]}, and {before[k]} are "
            "defined before it: corrupt",
        )
    top = int(np.argmax(resolved))
    highest = (int(resolved[top]), int(lines[face[top]]))
    return _fanned(resolved, counts), highest


def _fanned(corners: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``(sum(counts - 2), 3) int64`` triangles ``(c0, ck, ck+1)`` of polygons whose corner
    indices follow one another in ``corners``, ``counts[k]`` (>= 3) for polygon k."""
    start = np.cumsum(counts) - counts  # each polygon's first corner in ``corners``
    tris = counts - 2
    owner = np.repeat(np.arange(len(counts)), tris)
    step = np.arange(int(tris.sum())) - np.repeat(np.cumsum(tris) - tris, tris) + 1
    first = start[owner]
    return np.stack([corners[first], corners[first + step], corners[first + step + 1]], 1)


_OBJ_V = re.compile(rb"^[ \t]*v[ \t]+([^\r\n#]*)", re.M)
_OBJ_F = re.compile(rb"^[ \t]*f[ \t]+([^\r\n#]*)", re.M)


def _words_per_row(text: bytes) -> np.ndarray:
    """The number of words on each ``\\n``-separated row of ``text`` (numpy over its bytes)."""
    b = np.frombuffer(text, np.uint8)
    blank = (b == 32) | (b == 9) | (b == 10) | (b == 13)
    starts = ~blank
    starts[1:] &= blank[:-1]  # a word starts after a blank
    rows = np.r_[0, np.flatnonzero(b == 10) + 1]
    return np.add.reduceat(starts, rows, dtype=np.int64) if len(b) else np.zeros(1, np.int64)


def _obj_fast(data: bytes) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`read_obj` of a regular file (every vertex the same number of values, x y z
    first; polygons of positive indices) with whole-file regular expressions and numpy;
    None where anything is irregular (negative indices, a vertex of another width, an
    error), for the line-by-line reader. Each intermediate is dropped as soon as the next
    is made (peak memory)."""
    text = b"\n".join(_OBJ_V.findall(data))
    if not text:
        return None
    width = _words_per_row(text)
    if width[0] < 3 or not (width == width[0]).all():  # x y z, then a w or a colour
        return None
    rows, width = len(width), int(width[0])
    vertices = _numbers(text, np.float64)
    del text
    if vertices.size != width * rows:
        return None
    vertices = np.ascontiguousarray(vertices.reshape(-1, width)[:, :3])
    text = b"\n".join(_OBJ_F.findall(data))
    if not text:
        return vertices, np.zeros((0, 3), np.int64)
    text = re.sub(rb"/\S*", b"", text)  # 'v/vt/vn' -> 'v'
    counts = _words_per_row(text)
    if b"-" in text or (counts < 3).any():
        return None
    index = _numbers(text, np.int64)
    del text
    if index.size != counts.sum() or index.min() < 1 or index.max() > rows:
        return None
    index -= 1
    return vertices, _fanned(index, counts)


def read_obj(path: Path, data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """``(vertices (V, 3) float64, triangles (F, 3) int64)`` of an OBJ file's bytes: a
    regular file in bulk (:func:`_obj_fast`: 76 MB of a million vertices and two million
    triangles in about 3 s on a 2-core AMD EPYC), any other line by line."""
    check_text_encoding(path, data)
    data = _plain(data)
    fast = _obj_fast(data)
    if fast is not None:
        return fast
    rows: list[bytes] = []
    lines = array("q")
    faces: list[bytes] = []
    face_lines = array("q")
    defined = array("q")  # vertices read before each face
    done: list[np.ndarray] = []  # triangles of the blocks of faces parsed so far
    highest = (-1, 0)  # the highest vertex a face refers to, and its line

    def block() -> None:  # the faces read so far as triangles: bounded intermediates
        nonlocal highest
        if faces:
            triangles, top = _obj_faces(path, faces, face_lines, defined)
            done.append(triangles)
            highest = max(highest, top)
        faces.clear()
        del face_lines[:], defined[:]

    for lineno, line in enumerate(io.BytesIO(data), start=1):
        if b"#" in line:
            line = line.split(b"#", 1)[0]
        head = line[:2]
        if head not in (b"v ", b"f ", b"v\t", b"f\t"):
            words = line.split()
            if not words or words[0] not in (b"v", b"f"):
                continue  # vt, vn, o, g, usemtl, ... and blank lines
            head, line = words[0] + b" ", b" ".join(words)
        if head[:1] == b"v":
            if len(line.split(None, 4)) < 4:
                raise CorruptFileError(path, f"line {lineno}: a vertex needs x, y and z")
            rows.append(line[2:])
            lines.append(lineno)
        else:
            faces.append(line[2:])
            face_lines.append(lineno)
            defined.append(len(rows))
            if len(faces) == FACE_BLOCK:
                block()
    block()
    if not rows:
        raise CorruptFileError(path, "no vertices ('v' lines): not an OBJ mesh, or empty")
    vertices = _vertices(path, rows, lines)
    del rows
    if highest[0] >= len(vertices):
        raise CorruptFileError(
            path,
            f"line {highest[1]}: a face refers to vertex {highest[0] + 1}, and the file "
            f"defines {len(vertices)}: corrupt",
        )
    return vertices, np.concatenate(done) if done else np.zeros((0, 3), np.int64)


def read_off(path: Path, data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """``(vertices (V, 3) float64, triangles (F, 3) int64)`` of an OFF file's bytes."""
    check_text_encoding(path, data)
    content = _lines(data)
    first = next(content, None)
    if first is None or not first[1][0].upper().endswith(b"OFF"):
        raise CorruptFileError(path, "not an OFF file (its first word is not OFF)")
    head = first[1]
    if len(head) > 1 and head[1].upper() == b"BINARY":
        raise CorruptFileError(path, "binary OFF is not read (write it as text OFF, or PLY)")
    numbers = iter(head[1:])  # the counts may be on the header's line or the next ones
    last = first[0]  # the line the last number came from

    def number() -> int:
        nonlocal numbers, last
        for word in numbers:
            return int(word)
        last, words = next(content, (last, []))
        numbers = iter(words)
        return int(next(numbers))

    keyword = head[0].decode("latin-1")
    if "4" in keyword[:-3]:
        raise CorruptFileError(path, (
            f"{keyword}: homogeneous 4-D vertices are not read (write x y z as OFF)"
        ))  # fmt: skip
    try:
        # Geomview's nOFF: the vertices' dimension comes first, on its own line or not
        dimension = number() if keyword.endswith("nOFF") else 3
        nv = number()
        counts_line = last
        nf = number()
    except (StopIteration, ValueError):
        raise CorruptFileError(path, "not an OFF file (no vertex and face counts)") from None
    if last != counts_line:  # 'OFF\n3\n0 0 0': a vertex row read as the face count
        raise CorruptFileError(path, (
            f"line {counts_line}: the vertex count without the face count: not an OFF file"
        ))  # fmt: skip
    if dimension != 3:
        raise CorruptFileError(path, f"{keyword} of {dimension}-D vertices: only 3-D are read")
    if nv < 0 or nf < 0:
        raise CorruptFileError(path, f"OFF header declares {nv} vertices and {nf} faces: corrupt")
    rows: list[bytes] = []
    lines = array("q")
    corners = array("q")  # every face's corners, one after another
    sizes = array("q")  # corners a face
    faces = 0
    for lineno, words in content:
        if len(rows) < nv:
            if len(words) < 3:
                raise CorruptFileError(path, f"line {lineno}: a vertex needs x, y and z")
            rows.append(b" ".join(words[:3]))
            lines.append(lineno)
            continue
        if faces == nf:
            break
        try:
            k = int(words[0])
            face = [int(w) for w in words[1 : 1 + k]]
        except ValueError:
            raise CorruptFileError(path, f"line {lineno}: a face is not 'k i1 ... ik'") from None
        if k < 3 or len(face) < k:
            raise CorruptFileError(path, f"line {lineno}: a face needs 3 corners or more")
        if min(face) < 0 or max(face) >= nv:
            raise CorruptFileError(
                path, f"line {lineno}: a face refers to a vertex that does not exist: corrupt"
            )
        corners.extend(face)
        sizes.append(k)
        faces += 1
    if len(rows) < nv or faces < nf:
        raise CorruptFileError(
            path,
            f"OFF header declares {nv} vertices and {nf} faces, the file holds "
            f"{len(rows)} and {faces}: truncated",
        )
    vertices = _vertices(path, rows, lines) if rows else np.zeros((0, 3))
    if not sizes:
        return vertices, np.zeros((0, 3), np.int64)
    return vertices, _fanned(np.frombuffer(corners, np.int64), np.frombuffer(sizes, np.int64))
