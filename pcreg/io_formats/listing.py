"""Scans named on a command line: paths, directories of point files, glob patterns."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path

from pcreg.errors import InputError

__all__ = ["POINT_SUFFIXES", "scan_list"]

POINT_SUFFIXES = (".bin", ".ply", ".pcd", ".npy", ".npz", ".xyz", ".txt", ".csv", ".las", ".laz")


def scan_list(items: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Scans in time order from paths, a directory (its point files, sorted by name: KITTI's
    ``000000.bin ...``) or glob patterns (each expanded and sorted).

    Raises:
        InputError: a directory or pattern that names no scan."""
    out: list[Path] = []
    for item in items:
        text = os.fspath(item)
        if Path(text).is_dir():
            found = sorted(p for p in Path(text).iterdir() if p.suffix.lower() in POINT_SUFFIXES)
            if not found:
                raise InputError(text, "no point-cloud files in this directory")
            out += found
        elif any(c in text for c in "*?["):
            found = sorted(Path(p) for p in glob.glob(text))
            if not found:
                raise InputError(text, "the pattern matches no file")
            out += found
        else:
            out.append(Path(text))
    return out
