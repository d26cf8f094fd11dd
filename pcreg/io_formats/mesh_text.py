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
* OFF (also ``COFF``, ``NOFF``, ``CNOFF``, ``STOFF``): the header word, the counts (on its
  line or the next), then the declared vertices and faces (``k i1 ... ik [colour]``). Fewer
  lines than declared is a truncated file. Binary OFF is refused by name.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pcreg.errors import CorruptFileError

__all__ = ["read_obj", "read_off"]


def _fan(corners: list[int]) -> list[tuple[int, int, int]]:
    """Triangles ``(c0, ck, ck+1)`` of a polygon's corners (convex polygons, as exporters
    write them)."""
    return [(corners[0], corners[k], corners[k + 1]) for k in range(1, len(corners) - 1)]


def _vertices(path: Path, rows: list[list[bytes]], lines: list[int], what: str) -> np.ndarray:
    """``(V, 3) float64`` from the first three words of each row; the error names the line."""
    try:
        return np.array(rows, dtype=np.float64).reshape(-1, 3)
    except ValueError:
        for row, lineno in zip(rows, lines, strict=True):
            try:
                [float(v) for v in row]
            except ValueError:
                raise CorruptFileError(
                    path, f"line {lineno}: {what} is not three numbers: {b' '.join(row)!r}"
                ) from None
        raise


def read_obj(path: Path, data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """``(vertices (V, 3) float64, triangles (F, 3) int64)`` of an OBJ file's bytes."""
    rows: list[list[bytes]] = []
    lines: list[int] = []
    triangles: list[tuple[int, int, int]] = []
    last = (-1, 0)  # the highest vertex a face refers to, and its line
    for lineno, line in enumerate(data.splitlines(), start=1):
        words = line.split(b"#", 1)[0].split()
        if not words:
            continue
        if words[0] == b"v":
            if len(words) < 4:
                raise CorruptFileError(path, f"line {lineno}: a vertex needs x, y and z")
            rows.append(words[1:4])
            lines.append(lineno)
        elif words[0] == b"f":
            corners = []
            for word in words[1:]:
                try:
                    index = int(word.split(b"/", 1)[0])
                except ValueError:
                    raise CorruptFileError(
                        path, f"line {lineno}: a face corner is not an index: {word!r}"
                    ) from None
                # a positive index counts from the file's first vertex (checked once all
                # are read: readers accept a face before its vertices), a negative one back
                # from the last vertex read so far
                resolved = index - 1 if index > 0 else len(rows) + index
                if index == 0 or resolved < 0:
                    raise CorruptFileError(
                        path,
                        f"line {lineno}: a face refers to vertex {index}, and {len(rows)} "
                        "are defined before it: corrupt",
                    )
                corners.append(resolved)
                last = max(last, (resolved, lineno))
            if len(corners) < 3:
                raise CorruptFileError(path, f"line {lineno}: a face needs 3 corners or more")
            triangles.extend(_fan(corners))
    if not rows:
        raise CorruptFileError(path, "no vertices ('v' lines): not an OBJ mesh, or empty")
    if last[0] >= len(rows):
        raise CorruptFileError(
            path,
            f"line {last[1]}: a face refers to vertex {last[0] + 1}, and the file defines "
            f"{len(rows)}: corrupt",
        )
    return _vertices(path, rows, lines, "a vertex"), np.array(triangles, np.int64).reshape(-1, 3)


def read_off(path: Path, data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """``(vertices (V, 3) float64, triangles (F, 3) int64)`` of an OFF file's bytes."""
    content = [
        (lineno, words)
        for lineno, line in enumerate(data.splitlines(), start=1)
        if (words := line.split(b"#", 1)[0].split())
    ]
    if not content or not content[0][1][0].upper().endswith(b"OFF"):
        raise CorruptFileError(path, "not an OFF file (its first word is not OFF)")
    head = content[0][1]
    if len(head) > 1 and head[1].upper() == b"BINARY":
        raise CorruptFileError(path, "binary OFF is not read (write it as text OFF, or PLY)")
    counts, start = (
        (head[1:], 1) if len(head) > 1 else (content[1][1] if len(content) > 1 else [], 2)
    )
    try:
        nv, nf = int(counts[0]), int(counts[1])
    except (IndexError, ValueError):
        raise CorruptFileError(path, "not an OFF file (no vertex and face counts)") from None
    if nv < 0 or nf < 0:
        raise CorruptFileError(path, f"OFF header declares {nv} vertices and {nf} faces: corrupt")
    body = content[start:]
    if len(body) < nv + nf:
        raise CorruptFileError(
            path,
            f"OFF header declares {nv} vertices and {nf} faces, the file holds {len(body)} "
            "lines of them: truncated",
        )
    rows = [words[:3] for _, words in body[:nv]]
    if any(len(r) < 3 for r in rows):
        lineno = next(n for n, w in body[:nv] if len(w) < 3)
        raise CorruptFileError(path, f"line {lineno}: a vertex needs x, y and z")
    vertices = _vertices(path, rows, [n for n, _ in body[:nv]], "a vertex")
    triangles: list[tuple[int, int, int]] = []
    for lineno, words in body[nv : nv + nf]:
        try:
            k = int(words[0])
            corners = [int(w) for w in words[1 : 1 + k]]
        except ValueError:
            raise CorruptFileError(path, f"line {lineno}: a face is not 'k i1 ... ik'") from None
        if k < 3 or len(corners) < k:
            raise CorruptFileError(path, f"line {lineno}: a face needs 3 corners or more")
        if min(corners) < 0 or max(corners) >= nv:
            raise CorruptFileError(path, "a face refers to a vertex that does not exist: corrupt")
        triangles.extend(_fan(corners))
    return vertices, np.array(triangles, np.int64).reshape(-1, 3)
