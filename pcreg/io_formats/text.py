"""Text point clouds (``.xyz``, ``.txt``, ``.csv``, ``.pts``): rows of numbers, as tools write them.

The separators and the decimal mark are decided on the first data row and held to after it:

* values separated by blanks, commas or semicolons, in any mix (``1 2 3``, ``1,2,3``,
  ``1, 2, 3``, ``1;2;3``), with decimal points;
* **decimal commas** (``-0,042 0,342 0,65``: blanks between values; ``1,5;2,5;3,5``:
  semicolons). Rows without any comma before the first row of decimal commas are read as
  they are (``1 2 3``, then ``0,5 1,5 2,5``);
* **quoted values** (pandas' ``QUOTE_ALL``): split where the quotes say, a comma inside a
  quoted value being a decimal comma (``"1,5","2,5","3,5"``).

What would be read wrong is refused with the line named: a thousands separator beside a
decimal mark (``1,234.5``, ``1.234,5``), one row mixing decimal points and commas (``0,5
1.5 2,5``), an empty value between commas (``1,2,,4``), an underscore in a number
(``1_000``: Python's ``float`` reads it, no other tool does), a file whose every comma may as
well be a thousands separator as a decimal comma (``1,234 2,345 3,456`` throughout; one value
such as ``0,042`` anywhere settles it), UTF-16 or UTF-32 text (a byte-order mark, or NUL
bytes). One header line is allowed (a first line with a word that starts with a letter):
where it names the coordinates (``x y z`` in any case and order, ``//X`` as CloudCompare
writes, ``Easting Northing Elevation``, units as in ``x (m)`` or ``X [m]``; or a comment that
starts with them, ``# x y z i``) those columns are x, y, z (a pandas index column,
``intensity,x,y,z``); otherwise the first three are. A first line of numbers that does not
parse (``1.5.0 2 3``) is an error, not a header.
"""

from __future__ import annotations

import csv
import re
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import numpy as np

from pcreg.errors import CorruptFileError, EmptyCloudError
from pcreg.io_formats._common import check_text_encoding

__all__ = ["read_text"]

#: a header's names for the coordinates, after :func:`_column_name` (CloudCompare writes
#: ``//X``, surveyors ``Easting Northing Elevation``)
_AXIS_NAMES = (
    ("x", "easting", "east", "e"),
    ("y", "northing", "north", "n"),
    ("z", "elevation", "height", "altitude", "alt", "h"),
)
#: a value with a decimal comma (``-0,042``) or a whole number, digits before any comma
_DECIMAL_COMMA = re.compile(r"[+-]?\d+(?:,\d+)?(?:[eE][+-]?\d+)?")
#: a comma between digits (``0,5``; not ``1 ,2``, a separator with a blank before it)
_INNER_COMMA = re.compile(r"\d,\d")
#: a comma that may be a thousands separator (``1,234``, not ``0,342`` nor ``1,5``)
_THOUSANDS = re.compile(r"[+-]?[1-9]\d{0,2}(?:,\d{3})+")
#: an empty value between commas (``1,2,,4``, ``,1,2``) or semicolons; one ending a row is
#: allowed
_EMPTY_FIELD = re.compile(r"(?:^|,)\s*,")
_EMPTY_SEMICOLON = re.compile(r"(?:^|;)\s*;")
#: a unit on its own in a header (``X [m] Y [m] Z [m]``)
_UNIT = re.compile(r"[\[(].*[\])]")
#: a quoted value, for finding the separators outside them
_QUOTED = re.compile(r'"[^"]*"')
#: the longest line a text cloud may hold, in characters: a row of point values or a header
#: of column names is far shorter (100 columns of 25 characters: 2,500). Read whole, a single
#: 57 MiB line of 30 million numbers took 1.5 GiB (a Python string per number) and 4.4 s to
#: refuse; now it is refused when its first MiB has been read
MAX_LINE = 1 << 20


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


def _looks_like_header(text: str) -> bool:
    """Whether a first line that does not parse as numbers is a header: one of its words
    starts with a letter (quotes, CloudCompare's ``//``, ``%`` and brackets left out).
    ``1.5.0 2 3``, ``0x10 2 3`` and a Unicode minus are not: they are errors."""
    for word in re.split(r"[\s,;]+", text):
        word = word.strip("\"'/%[(")
        if word[:1].isalpha():
            return True
    return False


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


class _Rows:
    """The rows of one text file as numbers: the separators and decimal mark are decided on
    the first data row (:meth:`values`) and held to (module doc). ``ambiguous``: the first
    row of decimal commas that could all be thousands separators (``1,234``), until a value
    settles it (then False)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.decimal_comma: bool | None = None  # None: not decided yet
        self.commas_seen = False  # a row read with decimal points had a comma
        self.width = 0
        self.ambiguous: tuple[int, str] | bool | None = None

    def error(self, lineno: int, what: str) -> CorruptFileError:
        return CorruptFileError(self.path, f"line {lineno}: {what}")

    def values(self, line: str, lineno: int) -> list[float]:
        """The numbers of one data row (comments and blanks already stripped). The common
        rows (blanks, or commas without blanks) take a few string tests each: 1,000,000 rows
        of a 29 MB file, blank- or comma-separated, in 2.5-2.8 s, as the reader before these
        checks (2.3-3.7 s; medians of 3, alternating, 2-core AMD EPYC)."""
        quoted = '"' in line
        if quoted:
            fields = self._quoted_fields(line, lineno)
        else:
            comma = "," in line
            if self.decimal_comma is None or (comma and not self.decimal_comma
                                              and not self.commas_seen):  # fmt: skip
                self._decide(line, lineno)
            if self.decimal_comma:
                self._check_decimal_comma_row(line, lineno)
                fields = line.replace(";", " ").split()
            elif comma:
                self._check_comma_row(line, lineno)
                fields = line.replace(",", " ").replace(";", " ").split()
            else:
                fields = line.replace(";", " ").split() if ";" in line else line.split()
        if "_" in line:
            word = next(w for w in fields if "_" in w)
            raise self.error(lineno, f"{word!r}: an underscore in a number")
        if self.decimal_comma or quoted:
            return [self._comma_value(f, lineno) for f in fields]
        try:
            return [float(f) for f in fields]
        except ValueError as exc:
            raise self.error(lineno, f"non-numeric value ({exc})") from exc

    def _check_decimal_comma_row(self, line: str, lineno: int) -> None:
        """A row of decimal commas has no empty value between semicolons and, between
        blanks, no decimal point."""
        if ";" in line:
            if _EMPTY_SEMICOLON.search(line):
                raise self.error(lineno, f"{line!r}: an empty value between semicolons")
        elif "." in line:
            raise self.error(lineno, self._mixed(next(w for w in line.split() if "." in w)))

    def _check_comma_row(self, line: str, lineno: int) -> None:
        """A row of commas and decimal points has no empty value and, where blanks separate
        values too, no comma inside a value beside a decimal point (``1,234.5 2 3``)."""
        blanks = " " in line or "\t" in line
        if ",," in line or line[0] == "," or (blanks and _EMPTY_FIELD.search(line)):
            if line.lstrip()[0] == ",":
                raise self.error(lineno, (
                    f"{line!r} starts with a comma: an empty first value, or a decimal comma "
                    "without its 0 (write 0,5 or 0.5)"
                ))  # fmt: skip
            raise self.error(lineno, f"{line!r}: an empty value between commas")
        if blanks:
            words = line.split()
            if len(words) > 1 and any(_INNER_COMMA.search(w) for w in words):
                mixed = [w for w in words if "." in w]
                if mixed:
                    raise self.error(lineno, self._mixed(mixed[0]))

    @staticmethod
    def _mixed(word: str) -> str:
        return (
            f"{word!r} mixes decimal points and decimal commas in one file (a thousands "
            "separator?): write every value with one decimal mark and no thousands separators"
        )

    def _decide(self, line: str, lineno: int) -> None:
        """The decimal mark, from the first data row; a later row of decimal commas switches
        a file whose rows so far had no comma at all."""
        if self.decimal_comma is None:
            words = line.replace(";", " ").split()
            inner = [w for w in words if _INNER_COMMA.search(w)]
            # blanks between values, a comma inside one and a point in one ('0,5 1.5 2,5',
            # '1.234,5 2,5 3,5'); a row without blanks is comma-separated ('1.5,2.5,3.5')
            if ";" not in line and len(words) > 1 and inner and any("." in w for w in words):
                raise self.error(lineno, self._mixed(next(w for w in words if "." in w)))
            self.decimal_comma = ";" in line or (
                len(words) > 1 and bool(inner) and all(_DECIMAL_COMMA.fullmatch(w) for w in words)
            )
            self.commas_seen = "," in line
        elif not self.decimal_comma and not self.commas_seen and "," in line:
            words = line.split()
            if (len(words) == self.width and any(_INNER_COMMA.search(w) for w in words)
                    and all(_DECIMAL_COMMA.fullmatch(w) for w in words)):  # fmt: skip
                self.decimal_comma = True
            self.commas_seen = True

    def _quoted_fields(self, line: str, lineno: int) -> list[str]:
        """The values of a row with quotes, split where the quotes say: at ``;`` where the
        row has one outside its quotes, else at commas there, else at blanks."""
        outside = _QUOTED.sub(" ", line)
        delimiter = ";" if ";" in outside else "," if "," in outside else " "
        fields = next(csv.reader([line], delimiter=delimiter, skipinitialspace=True))
        fields = [f.strip() for f in fields]
        if fields and not fields[-1]:
            fields.pop()  # a separator ending the row
        if "" in fields:
            raise self.error(lineno, f"{line!r}: an empty value")
        if self.decimal_comma is None:
            self.decimal_comma = any(_INNER_COMMA.search(f) for f in fields)
        return fields

    def _comma_value(self, field: str, lineno: int) -> float:
        """One value where a comma is a decimal comma: a thousands separator beside a decimal
        mark is refused, and a value whose comma could be either is remembered
        (:attr:`ambiguous`) until another settles the file."""
        if "," in field:
            if "." in field:
                raise self.error(lineno, self._mixed(field))
            if self.ambiguous is not False:
                if _THOUSANDS.fullmatch(field):
                    self.ambiguous = self.ambiguous or (lineno, field)
                else:
                    self.ambiguous = False
        try:
            return float(field.replace(",", "."))
        except ValueError as exc:
            raise self.error(lineno, f"non-numeric value ({exc})") from exc


def _lines(path: Path, handle: TextIO) -> Iterator[tuple[int, str]]:
    """``(number, line)`` of a text file, each read at most :data:`MAX_LINE` characters at a
    time: a longer line is refused once that much of it is read."""
    lineno = 0
    while True:
        line = handle.readline(MAX_LINE + 1)  # a longest line and its line break
        if not line:
            return
        lineno += 1
        if len(line) > MAX_LINE and not line.endswith("\n"):
            raise CorruptFileError(
                path, f"line {lineno} is longer than {MAX_LINE:,} characters: not a row of "
                "point values"
            )  # fmt: skip
        yield lineno, line


def read_text(path: Path) -> np.ndarray:
    """A text cloud (module doc) as ``(N, C) float64``: the values are kept in one flat array
    as they are read (8 bytes each, whatever the line's length). Errors name the line."""
    with open(path, "rb") as handle:
        check_text_encoding(path, handle.read(4096))
    rows = _Rows(path)
    values = array("d")

    def add(row: list[float], lineno: int) -> None:
        if not rows.width:
            rows.width = len(row)
        elif len(row) != rows.width:
            raise rows.error(lineno, f"{len(row)} values, where the rows before have {rows.width}")
        values.extend(row)

    header: list[str] | None = None
    seen = False  # a data line (or the header) was read
    # bytes that are not UTF-8 (a Latin-1 header's 'T (°C)') kept as they are: a value made
    # of them is non-numeric, and said so with its line
    with open(path, encoding="utf-8-sig", errors="surrogateescape") as handle:
        for lineno, line in _lines(path, handle):
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
                    add(rows.values(text, lineno), lineno)
                except CorruptFileError:
                    if not _looks_like_header(text):
                        raise
                    rows.decimal_comma = None  # decided again on the first data row
                    header = _header_words(text.replace('"', ""))
                continue
            add(rows.values(text, lineno), lineno)
    if not seen:
        raise EmptyCloudError(path, "point cloud is empty (no data lines)")
    if not values:
        raise EmptyCloudError(path, "point cloud is empty (only a header line)")
    if rows.ambiguous:
        lineno, value = rows.ambiguous
        raise rows.error(
            lineno, f"{value!r}: every comma in the file may be a decimal comma or a thousands "
            "separator; write the values with points (1234.5 or 1.2345)"
        )  # fmt: skip
    table = np.frombuffer(values, dtype=np.float64).reshape(-1, rows.width)
    columns = None if header is None else _axis_columns(path, header, rows.width)
    return table if columns is None else table[:, columns]
