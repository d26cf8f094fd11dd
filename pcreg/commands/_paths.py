"""Default locations shared by the subcommands."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

__all__ = ["DEFAULT_SHARED_DATA", "file_out", "path_in"]

#: ``../shared/data`` beside a source checkout; $PCREG_SHARED_DATA overrides it.
DEFAULT_SHARED_DATA = Path(
    os.environ.get(
        "PCREG_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"
    )
)


def path_in(text: str) -> Path:
    """argparse type of a path: ``""`` is refused by name (``Path("")`` is ``.``, which was
    reported as "'.': is a directory")."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path" + (f" ({text!r})" if text else ""))
    return Path(text)


def file_out(text: str) -> Path:
    """argparse type of an output *file*: also refuses a name ending in a separator, which
    names a folder (``Path`` drops the slash, and the message named ``newdir`` as a file of an
    unknown format)."""
    path = path_in(text)
    if text.endswith(("/", os.sep)):
        raise argparse.ArgumentTypeError(f"{text!r} names a folder; give a file path in it")
    return path
