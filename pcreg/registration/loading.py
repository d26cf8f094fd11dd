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
from pathlib import Path

import torch

from pcreg.engine.checkpoint import load_checkpoint, save_checkpoint
from pcreg.errors import CorruptFileError, InputError
from pcreg.models.geotransformer import GeoTransformerConfig
from pcreg.registration.loaded import LoadedNetwork
from pcreg.registration.network import Registrar
from pcreg.registration.search import SearchConfig
from pcreg.registration.shipped import SHIPPED_MODELS, WEIGHTS_DIR, weights_path

__all__ = [
    "SHIPPED_MODELS",
    "WEIGHTS_DIR",
    "LoadedNetwork",
    "export_weights",
    "load_network",
    "weights_path",
]

_SEARCH_FIELDS = {f.name for f in dataclasses.fields(SearchConfig)}


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
