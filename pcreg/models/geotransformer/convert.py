"""Load the official GeoTransformer release checkpoints (``{"model": state_dict}``) into pcreg.

The key table below maps upstream module names (qinzheng93/GeoTransformer, experiments
``geotransformer.{3dmatch.stage4,kitti.stage5}.gse.k3.max.oacl.stage2.sinkhorn``: ``backbone.
encoder{s}_{j}``, ``backbone.decoder{s}``, ``transformer.transformer.layers.{i}.attention...``,
``optimal_transport.alpha``) onto pcreg's. It is generated from the architecture rules, checked
key by key and shape by shape; anything unmapped, missing or misshapen is an error naming it.

Numerical note: upstream KPConv divides by the number of neighbors whose features sum to a
positive value, pcreg by the number of real neighbors; the kernel points themselves (a buffer in
both) are taken from the checkpoint, so the convolution geometry is exactly upstream's.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import Tensor

from pcreg.errors import CorruptFileError, MissingFileError
from pcreg.models.geotransformer.config import GeoTransformerConfig

__all__ = ["convert_upstream_state_dict", "load_upstream_checkpoint", "upstream_key_table"]

_GN = {"norm.norm.weight": "norm.weight", "norm.norm.bias": "norm.bias"}


def _unary(up: str, ours: str, relu_norm: bool = True) -> dict[str, str]:
    table = {f"{up}.mlp.weight": f"{ours}.mlp.weight", f"{up}.mlp.bias": f"{ours}.mlp.bias"}
    if relu_norm:
        table[f"{up}.norm.norm.weight"] = f"{ours}.norm.weight"
        table[f"{up}.norm.norm.bias"] = f"{ours}.norm.bias"
    return table


def _kpconv(up: str, ours: str) -> dict[str, str]:
    return {f"{up}.KPConv.{n}": f"{ours}.conv.{n}" for n in ("weights", "bias", "kernel_points")}


def upstream_key_table(cfg: GeoTransformerConfig) -> dict[str, str]:
    """``{upstream_key: pcreg_key}`` for every parameter and buffer of the model."""
    t: dict[str, str] = {}
    init = cfg.init_dim
    # backbone: encoder{s}_{j} -> backbone.stages.{s-1}.{j-1}
    t.update(_kpconv("backbone.encoder1_1", "backbone.stages.0.0"))
    t["backbone.encoder1_1.norm.norm.weight"] = "backbone.stages.0.0.norm.weight"
    t["backbone.encoder1_1.norm.norm.bias"] = "backbone.stages.0.0.norm.bias"
    blocks = [(1, 2, init, 2 * init)]
    for s in range(2, cfg.num_stages + 1):
        d = init * 2 ** (s - 1)
        blocks += [(s, 1, d, d), (s, 2, d, 2 * d), (s, 3, 2 * d, 2 * d)]
    for s, j, c_in, c_out in blocks:
        up, ours = f"backbone.encoder{s}_{j}", f"backbone.stages.{s - 1}.{j - 1}"
        if c_in != c_out // 4:
            t.update(_unary(f"{up}.unary1", f"{ours}.unary1"))
        t.update(_kpconv(up, ours))
        t[f"{up}.norm_conv.norm.weight"] = f"{ours}.norm_conv.weight"
        t[f"{up}.norm_conv.norm.bias"] = f"{ours}.norm_conv.bias"
        t.update(_unary(f"{up}.unary2", f"{ours}.unary2"))
        if c_in != c_out:
            t.update(_unary(f"{up}.unary_shortcut", f"{ours}.shortcut"))
    for j, s in enumerate(range(cfg.num_stages - 1, 1, -1)):
        t.update(_unary(f"backbone.decoder{s}", f"backbone.decoders.{j}", relu_norm=s > 2))
    # geometric transformer
    for name in ("embedding.proj_d", "embedding.proj_a", "in_proj", "out_proj"):
        for p in ("weight", "bias"):
            t[f"transformer.{name}.{p}"] = f"transformer.{name}.{p}"
    for i, block in enumerate(cfg.blocks):
        up, ours = f"transformer.transformer.layers.{i}", f"transformer.layers.{i}"
        projections = ("q", "k", "v", "p") if block == "self" else ("q", "k", "v")
        pairs = {f"attention.attention.proj_{x}": f"attn.{x}_proj" for x in projections}
        pairs.update(
            {
                "attention.linear": "attn.out_proj",
                "attention.norm": "norm1",
                "output.expand": "ffn.layers.0",
                "output.squeeze": "ffn.layers.1",
                "output.norm": "norm2",
            }
        )
        for a, b in pairs.items():
            for p in ("weight", "bias"):
                t[f"{up}.{a}.{p}"] = f"{ours}.{b}.{p}"
    t["optimal_transport.alpha"] = "matcher.optimal_transport.alpha"
    return t


def convert_upstream_state_dict(
    upstream: dict[str, Tensor], cfg: GeoTransformerConfig, expected: dict[str, Tensor]
) -> dict[str, Tensor]:
    """Rename ``upstream`` to pcreg keys, checking coverage and shapes against ``expected``
    (a pcreg model's ``state_dict()``). Raises ``ValueError`` naming the offending keys."""
    table = upstream_key_table(cfg)
    unknown = sorted(set(upstream) - set(table))
    missing = sorted(set(table) - set(upstream))
    if unknown or missing:
        raise ValueError(
            f"checkpoint does not match the configuration: unexpected keys {unknown[:5]}"
            f"{'...' if len(unknown) > 5 else ''}, missing keys {missing[:5]}"
            f"{'...' if len(missing) > 5 else ''}"
        )
    out = {}
    for key, value in upstream.items():
        ours = table[key]
        if ours not in expected:
            raise ValueError(f"key table maps {key} to {ours}, which the model does not have")
        if tuple(value.shape) != tuple(expected[ours].shape):
            raise ValueError(
                f"{key}: shape {tuple(value.shape)} does not fit "
                f"{ours} {tuple(expected[ours].shape)}"
            )
        out[ours] = value.to(expected[ours].dtype)
    uncovered = sorted(set(expected) - set(out))
    if uncovered:
        raise ValueError(f"the checkpoint leaves pcreg keys unset: {uncovered[:5]}")
    return out


def load_upstream_checkpoint(path: str | os.PathLike[str], model: torch.nn.Module) -> None:
    """Load an official release file (``{"model": state_dict}``) into a pcreg
    :class:`~pcreg.models.geotransformer.GeoTransformer` built with the matching config."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(path, "checkpoint not found")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise CorruptFileError(path, f"cannot read checkpoint ({type(err).__name__})") from None
    if not isinstance(payload, dict) or "model" not in payload:
        raise CorruptFileError(path, "not a GeoTransformer release checkpoint (no 'model' key)")
    try:
        converted = convert_upstream_state_dict(payload["model"], model.config, model.state_dict())
    except ValueError as err:
        raise CorruptFileError(path, str(err)) from None
    model.load_state_dict(converted, strict=True)
