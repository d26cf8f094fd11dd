"""Loading the shipped networks (``pcreg/weights/<name>.pt``) or any checkpoint.

``pcreg/weights/`` is data only: ``<name>.pt`` holds half-precision weights plus the model
configuration (a ``"geotransformer"`` checkpoint, :mod:`pcreg.engine.checkpoint`), ``<name>.md``
its model card. A checkpoint may also carry the network's default inference settings (an
``"inference"`` entry, a :class:`~pcreg.registration.search.SearchConfig` as a dict); files
written before that split keep them among the configuration's keys, and both are read.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from pcreg.engine.checkpoint import load_checkpoint, save_checkpoint
from pcreg.errors import CorruptFileError, InputError, MissingFileError
from pcreg.models.geotransformer import GeoTransformerConfig
from pcreg.registration.network import Registrar
from pcreg.registration.search import SearchConfig

__all__ = [
    "SHIPPED_MODELS",
    "WEIGHTS_DIR",
    "LoadedNetwork",
    "export_weights",
    "load_network",
    "weights_path",
]

#: the package's data folder of shipped weights and model cards
WEIGHTS_DIR = Path(__file__).resolve().parents[1] / "weights"
#: name -> what it is for; a name is usable once ``<name>.pt`` exists in :data:`WEIGHTS_DIR`.
SHIPPED_MODELS = {
    "indoor": "RGB-D fragments (3DMatch-like): 5 cm voxels, 4 stages",
    "outdoor": "LiDAR scans (KITTI-like): 0.3 m voxels, 5 stages",
}
_SEARCH_FIELDS = {f.name for f in dataclasses.fields(SearchConfig)}


@dataclass
class LoadedNetwork:
    """A network ready to run, with what its checkpoint says about using it.

    network: the :class:`Registrar`. search: its default :class:`SearchConfig`. name: the
    shipped name or the checkpoint path. setting: ``"indoor"`` / ``"outdoor"`` when the
    checkpoint or the shipped name says so, else None (the pipeline then decides).
    """

    network: Registrar
    search: SearchConfig
    name: str
    setting: str | None = None


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


def load_network(
    model: str | os.PathLike[str] = "indoor",
    device: str | torch.device = "cpu",
    neighbor_backend: str = "auto",
) -> LoadedNetwork:
    """The network of a shipped model name or a checkpoint file.

    Accepts ``"indoor"``, ``"outdoor"``, a file written by :func:`export_weights` or
    :func:`~pcreg.registration.network.save_model_checkpoint`, or a training checkpoint
    (``last.pt`` / ``best.pt``) of ``pcreg train``.

    Raises:
        InputError: unknown name; MissingFileError / CorruptFileError: no such file, or not a
            registration model.
    """
    path = weights_path(model)
    ckpt = load_checkpoint(path)
    if ckpt.get("kind") == "geotransformer-train":  # pcreg train's last.pt / best.pt
        config = ckpt.get("model_config")
    elif ckpt.get("kind") == "geotransformer":
        config = ckpt.get("config")
    else:
        raise CorruptFileError(
            path, f"is a {ckpt.get('kind')!r} checkpoint, not a registration model"
        )
    if not isinstance(config, dict) or not isinstance(ckpt.get("model"), dict):
        raise CorruptFileError(path, "has no model configuration or weights")
    inference = {k: v for k, v in config.items() if k in _SEARCH_FIELDS}
    inference.update(ckpt.get("inference") or {})
    try:
        search = SearchConfig(**inference)
        network = Registrar.from_state(config, ckpt["model"], device, neighbor_backend)
    except (TypeError, ValueError, RuntimeError) as err:
        raise CorruptFileError(
            path, f"cannot build its model ({str(err).splitlines()[0]})"
        ) from None
    cfg = network.config
    if not (math.isfinite(cfg.voxel_size) and cfg.voxel_size > 0 and cfg.num_stages >= 1):
        raise CorruptFileError(
            path,
            f"has an unusable model configuration (voxel_size {cfg.voxel_size}, num_stages "
            f"{cfg.num_stages})",
        )
    text = os.fspath(model)
    setting = text if text in SHIPPED_MODELS else ckpt.get("setting")
    return LoadedNetwork(network, search, text, setting)


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
    training step, ``setting="indoor"``, ``inference={...}``) are stored beside the weights; a
    training checkpoint's ``step``, ``epoch`` and ``best_rr`` (best validation registration
    recall) are kept unless ``extra`` names them.
    """
    ckpt = load_checkpoint(checkpoint)
    if ckpt.get("kind") not in {"geotransformer", "geotransformer-train"} or "config" not in ckpt:
        raise InputError(
            checkpoint, f"is a {ckpt.get('kind')!r} checkpoint, not a registration model"
        )
    config = ckpt.get("model_config", ckpt["config"])  # training checkpoints keep both
    state = {k: v.half() if half and v.is_floating_point() else v for k, v in ckpt["model"].items()}
    fields = {f.name for f in dataclasses.fields(GeoTransformerConfig)} | _SEARCH_FIELDS
    config = {k: v for k, v in config.items() if k in fields}
    # provenance of a training checkpoint travels with the weights (the model card cites it)
    kept = {
        k: ckpt[k]
        for k in ("step", "epoch", "best_rr", "inference", "setting")
        if k in ckpt and k not in extra
    }
    return save_checkpoint(
        out, "geotransformer", state, overwrite=overwrite, config=config, **kept, **extra
    )
