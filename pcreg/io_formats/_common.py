"""Helpers shared by the readers: a path's format and existence; for the PLY and PCD parsers,
bytes, headers, counts and ASCII rows."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pcreg.errors import CorruptFileError, MissingFileError, UnknownFormatError

_AXES = ("x", "y", "z")

#: how a memory refusal names the cap: the same message reaches the command line and Python
MAX_MEMORY_ADVICE = "--max-memory / max_memory="


def check_suffix(path: Path, formats: tuple[str, ...], what: str) -> str:
    """The lower-case extension of ``path``; UnknownFormatError unless it is in ``formats``."""
    suffix = path.suffix.lower()
    if suffix not in formats and path.is_dir():
        raise UnknownFormatError(path, f"is a directory, not a {what} file")
    if suffix not in formats:
        raise UnknownFormatError(
            path,
            f"unknown {what} format {suffix or '(no extension)'!r}; expected one of "
            + ", ".join(formats),
        )
    return suffix


def check_file(path: Path, formats: tuple[str, ...], what: str) -> str:
    """:func:`check_suffix`, then MissingFileError unless ``path`` is an existing regular file."""
    suffix = check_suffix(path, formats, what)
    if not path.exists():
        if path.is_symlink():  # a link to nothing, or to itself through others
            try:
                path.resolve(strict=True)
            except RuntimeError:  # Python 3.11-3.12: a loop; 3.13 raises OSError(ELOOP)
                raise MissingFileError(path, "a symbolic link that loops") from None
            except OSError as err:
                if err.errno == errno.ELOOP:
                    raise MissingFileError(path, "a symbolic link that loops") from None
                if err.errno != errno.ENOENT:  # a folder on the way that cannot be read
                    raise MissingFileError(path, f"a symbolic link that cannot be followed "
                                           f"({err.strerror})") from None  # fmt: skip
            end = os.path.realpath(path)  # the end of a chain of links, where nothing is
            raise MissingFileError(path, f"a symbolic link to a missing file ({end})")
        raise MissingFileError(path, "file not found")
    if not path.is_file():
        raise MissingFileError(path, "is not a regular file")
    return suffix


def check_text_encoding(path: Path, data: bytes) -> None:
    """A UTF-16 or UTF-32 text file (Windows' 'Unicode') is named as such: its bytes are not
    the ASCII words the parsers read (an OBJ read as 'no vertices', an OFF as 'not OFF', a
    text cloud as 'invalid UTF-8'). ``data``: the file's first bytes or more."""
    for bom, name in ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
                      (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16")):  # fmt: skip
        if data.startswith(bom):
            raise CorruptFileError(path, f"{name} text: save it as UTF-8 (or ASCII)")
    if b"\x00" in data[:4096]:  # no byte-order mark: text never holds NUL bytes
        raise CorruptFileError(
            path, "NUL bytes: UTF-16 or UTF-32 text, or not text; save it as UTF-8 (or ASCII)"
        )


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


# --------------------------------------------------------------------------- results
@dataclass
class RawCloud:
    """What a format reader found, before :func:`pcreg.io.validate_points` drops anything.

    Attributes:
        xyz: ``(N, 3) float64`` coordinates in the file's units (metres); may hold NaN/Inf.
        marked: ``(N,) bool``, True where the format marks a finite point invalid (the
            ``(0, 0, 0)`` pixels of an organised cloud, an E57 ``cartesianInvalidState``);
            None when nothing is marked.
        marked_what: the words for a marked point in messages, e.g. "(0, 0, 0) pixels".
        organized: ``(height, width)`` of an organised cloud (one point per pixel), else None.
        content: what the points are, for the log ("points", "mesh vertices", ...).
        faces: faces a PLY file declares (a mesh, for :mod:`pcreg.io_formats.mesh`).
    """

    xyz: np.ndarray
    marked: np.ndarray | None = None
    marked_what: str = ""
    organized: tuple[int, int] | None = None
    content: str = "points"
    faces: int = 0


def organized_zeros(xyz: np.ndarray, height: int, width: int) -> np.ndarray | None:
    """The ``(0, 0, 0)`` points of an organised cloud (``height > 1``), where RGB-D and
    LiDAR drivers put a pixel without a return; None for an unorganised cloud (where the
    origin is a real point)."""
    if height <= 1 or width <= 1:
        return None
    zero = (xyz == 0).all(axis=1)
    return zero if zero.any() else None


def check_index(path, index: int, count: int, item: str, holder: str) -> None:
    """Refuse ``index`` outside ``0 .. count - 1`` with one line: ``"{item} #{index} does not
    exist: {holder} {count} {kind}s (#0 to #N, 0-based)"`` (``item`` e.g. ``"scan"``,
    ``"message of /velodyne"``; ``holder`` e.g. ``"the file holds"``)."""
    from pcreg.errors import InputError

    if 0 <= index < count:
        return
    first, _, rest = item.partition(" ")
    noun = first + ("" if count == 1 else "s")
    raise InputError(
        path,
        f"{first} #{index}{' ' + rest if rest else ''} does not exist: {holder} {count} {noun} "
        f"(#0 to #{count - 1}, 0-based)",
    )
