"""DETR: end-to-end set prediction of boxes (Carion et al., ECCV 2020), built on the shared
transformer layers of :mod:`pcreg.layers` and our own small :class:`~pcreg.models.backbones.
resnet.ResNet`.

Image features (1x1-projected to ``d_model``) plus a 2-D sine encoding of the valid pixels go
through a post-norm encoder; ``num_queries`` learned object queries go through a decoder whose
every layer's output (after a shared LayerNorm) is decoded by the same heads: a linear class
head over ``num_classes + 1`` (the last is "no object") and a 3-layer MLP giving normalised
``(cx, cy, w, h)`` through a sigmoid. Positions are added to queries and keys, never values.

Padded batches: an image's predictions do not depend on the batch it is in or on how much
padding the batch adds (equal to float rounding, ~1e-6, to those of the image alone,
unpadded; eval mode). Three things make it so: the backbone zeroes its features outside each
image so no convolution reads the padding (:class:`~pcreg.models.backbones.resnet.ResNet`);
the valid mask at feature resolution is the backbone's own (``feature_mask``: strided
subsampling, matching the convolutions' output sizes; nearest interpolation to the padded
canvas's feature size is off by a row or column whenever the canvas is not a multiple of the
stride); and that mask drives the sine positions (normalised by each image's valid extent)
and the key padding mask of every attention reading the image.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from pcreg.layers import (
    Mlp,
    MultiHeadAttention,
    TransformerDecoderLayer,
    TransformerLayer,
    sine_encoding_2d,
)
from pcreg.models.backbones.resnet import ResNet

__all__ = ["DETR", "DetrConfig", "build_detr"]


@dataclass
class DetrConfig:
    """Sizes of :class:`DETR` and its backbone (defaults: the synthetic-shapes model)."""

    num_classes: int = 3
    num_queries: int = 12
    d_model: int = 128
    num_heads: int = 4
    enc_layers: int = 2
    dec_layers: int = 3
    ffn_dim: int = 256
    dropout: float = 0.0
    aux_loss: bool = True
    backbone_widths: list[int] = field(default_factory=lambda: [32, 64, 128])
    backbone_depths: list[int] = field(default_factory=lambda: [1, 1, 1])
    backbone_strides: list[int] = field(default_factory=lambda: [1, 2, 2])
    frozen_bn: bool = False


class DETR(nn.Module):
    """``DETR(backbone, ...)``: the backbone is injected: anything with ``out_channels``,
    called as ``backbone(images, valid) -> (B, out_channels, h, w)`` features that do not
    depend on the padding, with ``backbone.feature_mask(valid) -> (B, h, w)`` their valid
    mask (as :class:`~pcreg.models.backbones.resnet.ResNet`)."""

    def __init__(
        self,
        backbone: nn.Module,
        num_classes: int,
        num_queries: int,
        d_model: int = 128,
        num_heads: int = 4,
        enc_layers: int = 2,
        dec_layers: int = 3,
        ffn_dim: int = 256,
        dropout: float = 0.0,
        aux_loss: bool = True,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.input_proj = nn.Conv2d(backbone.out_channels, d_model, 1)
        self.encoder = nn.ModuleList(
            TransformerLayer(
                MultiHeadAttention(d_model, num_heads, dropout), d_model, ffn_dim, dropout
            )
            for _ in range(enc_layers)
        )
        self.decoder = nn.ModuleList(
            TransformerDecoderLayer(d_model, num_heads, ffn_dim, dropout) for _ in range(dec_layers)
        )
        self.decoder_norm = nn.LayerNorm(d_model)
        self.query_embed = nn.Embedding(num_queries, d_model)
        self.class_head = nn.Linear(d_model, num_classes + 1)
        self.box_head = Mlp(d_model, d_model, 4, num_layers=3, activation="relu")
        self.num_classes = num_classes
        self.num_queries = num_queries
        self.d_model = d_model
        self.aux_loss = aux_loss

    def forward(self, images: Tensor, valid: Tensor) -> dict:
        """images ``(B, 3, H, W)`` (zero padded), valid ``(B, H, W)`` bool (True = pixel).

        Returns ``{"pred_logits": (B, Q, K+1), "pred_boxes": (B, Q, 4) cxcywh in [0, 1] of
        each image's valid extent, "aux_outputs": [same, per earlier decoder layer]}``.
        """
        if valid.dtype != torch.bool:
            raise TypeError(f"valid must be a bool mask (True = pixel), got {valid.dtype}")
        feats = self.backbone(images, valid)
        b = feats.shape[0]
        mask = self.backbone.feature_mask(valid)  # (B, h, w), the backbone's own geometry
        if mask.shape != (b, *feats.shape[2:]):
            raise ValueError(
                f"backbone feature mask {tuple(mask.shape)} does not match its features "
                f"{tuple(feats.shape)}"
            )
        pos = sine_encoding_2d(mask, self.d_model).to(feats.dtype)  # (B, C, h, w)
        src = self.input_proj(feats).flatten(2).transpose(1, 2)  # (B, hw, C)
        pos = pos.flatten(2).transpose(1, 2)
        pad = ~mask.flatten(1)  # (B, hw) True = pad
        for layer in self.encoder:
            src, _ = layer(src, key_padding_mask=pad, query_pos=pos, key_pos=pos)
        query_pos = self.query_embed.weight[None].expand(b, -1, -1)
        tgt = torch.zeros_like(query_pos)
        outputs = []
        for layer in self.decoder:
            tgt, _ = layer(
                tgt, src, query_pos=query_pos, memory_pos=pos, memory_key_padding_mask=pad
            )
            outputs.append(self.decoder_norm(tgt))
        hs = torch.stack(outputs)  # (L, B, Q, C)
        logits = self.class_head(hs)
        boxes = self.box_head(hs).sigmoid()
        out = {"pred_logits": logits[-1], "pred_boxes": boxes[-1]}
        out["aux_outputs"] = (
            [
                {"pred_logits": a, "pred_boxes": c}
                for a, c in zip(logits[:-1], boxes[:-1], strict=True)
            ]
            if self.aux_loss
            else []
        )
        return out


def build_detr(cfg: DetrConfig) -> DETR:
    backbone = ResNet(
        cfg.backbone_widths, cfg.backbone_depths, cfg.backbone_strides, frozen_bn=cfg.frozen_bn
    )
    return DETR(
        backbone,
        cfg.num_classes,
        cfg.num_queries,
        cfg.d_model,
        cfg.num_heads,
        cfg.enc_layers,
        cfg.dec_layers,
        cfg.ffn_dim,
        cfg.dropout,
        cfg.aux_loss,
    )
