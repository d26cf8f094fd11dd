"""The shipped networks: their names and where their weights are (torch-free: the command
line resolves a model name before it knows whether torch is needed)."""

from __future__ import annotations

import os
from pathlib import Path

from pcreg.errors import InputError, MissingFileError

__all__ = ["SHIPPED_MODELS", "WEIGHTS_DIR", "weights_path"]

#: the package's data folder of shipped weights and model cards
WEIGHTS_DIR = Path(__file__).resolve().parents[1] / "weights"
#: name -> what it is for; a name is usable once ``<name>.pt`` exists in :data:`WEIGHTS_DIR`.
SHIPPED_MODELS = {
    "indoor": "RGB-D fragments (3DMatch-like): 5 cm voxels, 4 stages",
    "outdoor": "LiDAR scans (KITTI-like): 0.3 m voxels, 5 stages",
}


def weights_path(model: str | os.PathLike[str]) -> Path:
    """Resolve ``"indoor"`` / ``"outdoor"`` to the shipped file, or return a checkpoint path.

    Raises:
        InputError: an unknown name, or a shipped model whose weights are not in this build.
        MissingFileError: a path that does not exist.
    """
    text = os.fspath(model)
    if not text.strip():
        raise InputError(
            "model", f"is empty; use one of {', '.join(SHIPPED_MODELS)} or a checkpoint path"
        )
    if text in SHIPPED_MODELS:
        path = WEIGHTS_DIR / f"{text}.pt"
        if not path.is_file():
            raise InputError(
                text, f"the shipped {text!r} weights are not in this build ({path} is missing)"
            )
        return path
    path = Path(text)
    if path.suffix in {".pt", ".pth", ".tar"} or path.exists() or os.sep in text:
        if path.is_dir():
            raise MissingFileError(path, "is a directory, not a model checkpoint file")
        if not path.is_file():
            raise MissingFileError(path, "model checkpoint not found")
        return path
    raise InputError(
        text, f"unknown model; use one of {', '.join(SHIPPED_MODELS)} or a checkpoint path"
    )
