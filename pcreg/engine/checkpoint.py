"""Checkpoints written atomically (temp file, fsync, rename) and read with clear errors.

A checkpoint is a dict ``{"format": "pcreg", "version": 1, "kind": str, "model": state_dict,
...}``; anything else a trainer wants to keep (config, optimizer, step, RNG states, metrics)
sits beside ``model``. Loading uses ``torch.load(weights_only=True)``: no pickled code runs.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import torch

from pcreg._fs import atomic_output
from pcreg.errors import CorruptFileError, MissingFileError

__all__ = ["CHECKPOINT_FORMAT", "load_checkpoint", "save_checkpoint"]

CHECKPOINT_FORMAT = "pcreg"
CHECKPOINT_VERSION = 1


def save_checkpoint(
    path: str | os.PathLike[str],
    kind: str,
    model_state: dict[str, Any],
    *,
    overwrite: bool = True,
    **extra: Any,
) -> Path:
    """Write a checkpoint atomically; a crash leaves the previous file intact."""
    payload = {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "kind": kind,
        "model": model_state,
        **extra,
    }
    with atomic_output(path, overwrite=overwrite) as tmp:
        try:
            torch.save(payload, tmp)
        except RuntimeError as err:  # torch's zip writer cut short (a full disk, ulimit -f)
            if "inline_container" not in str(err) and "PytorchStreamWriter" not in str(err):
                raise
            why = f"could not be written in full ({_first_line(err)}): is the disk full?"
            raise OSError(errno.EIO, why, str(path)) from err
    return Path(path)


def load_checkpoint(
    path: str | os.PathLike[str], kind: str | None = None, map_location: str | torch.device = "cpu"
) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (optionally of a given ``kind``).

    Raises:
        MissingFileError: no such file.
        CorruptFileError: truncated / not a torch file / not a pcreg checkpoint / wrong kind.
    """
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(path, "checkpoint not found")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # zip errors, unpickling errors, EOF ...
        raise CorruptFileError(
            path, f"cannot read checkpoint ({type(err).__name__}: {_first_line(err)})"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CorruptFileError(path, "not a pcreg checkpoint (no 'format': 'pcreg' entry)")
    if kind is not None and payload.get("kind") != kind:
        raise CorruptFileError(path, f"is a {payload.get('kind')!r} checkpoint, expected {kind!r}")
    return payload


def _first_line(err: BaseException) -> str:
    """The first line of an error's message (``"no message"`` for an empty one: torch's
    EOFError on a 0-byte file)."""
    lines = str(err).splitlines()
    return lines[0] if lines else "no message"
