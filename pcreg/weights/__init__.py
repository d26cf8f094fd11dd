"""The registration models that ship inside the package, and the way to load any checkpoint.

``pcreg/weights/<name>.pt`` holds half-precision weights plus the model configuration (a
``"geotransformer"`` checkpoint, see :mod:`pcreg.engine.checkpoint`); ``<name>.md`` is its model
card (data, recipe, steps, wall time, machine, measured results). :func:`export_weights` turns a
training checkpoint into such a file.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import torch

from pcreg.engine.checkpoint import load_checkpoint, save_checkpoint
from pcreg.errors import InputError, MissingFileError

__all__ = ["SHIPPED_MODELS", "WEIGHTS_DIR", "export_weights", "load_model", "weights_path"]

WEIGHTS_DIR = Path(__file__).resolve().parent
#: name -> what it is for; a name is usable once ``<name>.pt`` exists in :data:`WEIGHTS_DIR`.
SHIPPED_MODELS = {
    "indoor": "RGB-D fragments (3DMatch-like): 2.5 cm voxels, 4 stages",
    "outdoor": "LiDAR scans (KITTI-like): 0.3 m voxels, 5 stages",
}


def weights_path(model: str | os.PathLike[str]) -> Path:
    """Resolve ``"indoor"`` / ``"outdoor"`` to the shipped file, or return a checkpoint path.

    Raises:
        InputError: an unknown name, or a shipped model whose weights are not in this build.
        MissingFileError: a path that does not exist.
    """
    text = os.fspath(model)
    if text in SHIPPED_MODELS:
        path = WEIGHTS_DIR / f"{text}.pt"
        if not path.is_file():
            raise InputError(
                text, f"the shipped {text!r} weights are not in this build ({path} is missing)"
            )
        return path
    path = Path(text)
    if path.suffix in {".pt", ".pth", ".tar"} or path.exists() or os.sep in text:
        if not path.is_file():
            raise MissingFileError(path, "model checkpoint not found")
        return path
    raise InputError(
        text, f"unknown model; use one of {', '.join(SHIPPED_MODELS)} or a checkpoint path"
    )


def load_model(
    model: str | os.PathLike[str] = "indoor",
    device: str | torch.device = "cpu",
    **overrides: object,
):
    """A :class:`~pcreg.engine.inference.Registrar` for a shipped model name or a checkpoint.

    Accepts ``"indoor"``, ``"outdoor"``, a file written by :func:`export_weights` or
    :func:`~pcreg.engine.inference.save_model_checkpoint`, or a training checkpoint
    (``last.pt`` / ``best.pt``) of ``pcreg train``. ``overrides`` replace inference-time
    fields of the stored :class:`~pcreg.models.geotransformer.GeoTransformerConfig` (e.g.
    ``orientation_keep=0.0`` to run all 24 orientation hypotheses of the indoor model).
    """
    from pcreg.engine.inference import Registrar

    return Registrar.from_checkpoint(weights_path(model), device=device, **overrides)


def export_weights(
    checkpoint: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    half: bool = True,
    overwrite: bool = False,
    **extra: object,
) -> Path:
    """Write the model of a training (or model) checkpoint as a compact inference file.

    Floating-point tensors are stored in float16 when ``half`` (the loader casts back to
    float32; the largest relative rounding error is 2^-11). ``extra`` entries (e.g. the
    training step) are stored beside the weights; a training checkpoint's ``step``, ``epoch``
    and ``best_rr`` (best validation registration recall) are kept unless ``extra`` names them.
    """
    ckpt = load_checkpoint(checkpoint)
    if ckpt.get("kind") not in {"geotransformer", "geotransformer-train"} or "config" not in ckpt:
        raise InputError(
            checkpoint, f"is a {ckpt.get('kind')!r} checkpoint, not a registration model"
        )
    config = ckpt.get("model_config", ckpt["config"])  # training checkpoints keep both
    state = {k: v.half() if half and v.is_floating_point() else v for k, v in ckpt["model"].items()}
    from pcreg.models.geotransformer import GeoTransformerConfig

    fields = {f.name for f in dataclasses.fields(GeoTransformerConfig)}
    config = {k: v for k, v in config.items() if k in fields}
    # provenance of a training checkpoint travels with the weights (the model card cites it)
    kept = {k: ckpt[k] for k in ("step", "epoch", "best_rr") if k in ckpt and k not in extra}
    return save_checkpoint(
        out, "geotransformer", state, overwrite=overwrite, config=config, **kept, **extra
    )
