"""Vision Transformer classifier (Dosovitskiy et al., ICLR 2021) on ``pcreg.layers``.

Patch embedding (a strided convolution), a class token, a learned position embedding, a
pre-norm encoder of :class:`~pcreg.layers.TransformerLayer` with
:class:`~pcreg.layers.MultiHeadAttention`, a final LayerNorm and a linear head on the class
token. The named configurations follow the paper / DeiT (Ti, S, B at patch 16); ``digits`` is a
small one for 8x8 images.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import torch
from torch import Tensor, nn

from pcreg.layers import LearnedPositionEmbedding, MultiHeadAttention, TransformerLayer

__all__ = ["VIT_CONFIGS", "ViTConfig", "VisionTransformer", "attention_rollout", "vit_from_name"]


@dataclass(frozen=True)
class ViTConfig:
    """Architecture of a :class:`VisionTransformer` (all sizes in pixels / channels)."""

    img_size: int = 224
    patch_size: int = 16
    in_chans: int = 3
    num_classes: int = 1000
    embed_dim: int = 768
    depth: int = 12
    num_heads: int = 12
    mlp_ratio: float = 4.0
    dropout: float = 0.0
    attn_dropout: float = 0.0
    drop_path: float = 0.0


#: Named configurations. ViT-B/16 at 224 px with 1000 classes has 86,567,656 parameters.
VIT_CONFIGS: dict[str, ViTConfig] = {
    "vit_tiny_patch16": ViTConfig(embed_dim=192, depth=12, num_heads=3),
    "vit_small_patch16": ViTConfig(embed_dim=384, depth=12, num_heads=6),
    "vit_base_patch16": ViTConfig(embed_dim=768, depth=12, num_heads=12),
    "digits": ViTConfig(
        img_size=8,
        patch_size=2,
        in_chans=1,
        num_classes=10,
        embed_dim=64,
        depth=4,
        num_heads=4,
        mlp_ratio=2.0,
        dropout=0.1,
        drop_path=0.1,
    ),
}


class VisionTransformer(nn.Module):
    """ViT classifier. ``forward(images (B, C, H, W) float) -> logits (B, num_classes)``."""

    def __init__(self, config: ViTConfig | None = None, **overrides: object) -> None:
        super().__init__()
        cfg = replace(config or ViTConfig(), **overrides)
        if cfg.img_size % cfg.patch_size:
            raise ValueError(
                f"img_size {cfg.img_size} is not a multiple of patch_size {cfg.patch_size}"
            )
        self.config = cfg
        c = cfg.embed_dim
        self.grid = cfg.img_size // cfg.patch_size
        self.num_patches = self.grid**2
        self.patch_embed = nn.Conv2d(cfg.in_chans, c, cfg.patch_size, stride=cfg.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c))
        self.pos_embed = LearnedPositionEmbedding(self.num_patches + 1, c)
        self.pos_drop = nn.Dropout(cfg.dropout)
        rates = torch.linspace(0, cfg.drop_path, cfg.depth).tolist()
        self.blocks = nn.ModuleList(
            TransformerLayer(
                MultiHeadAttention(c, cfg.num_heads, cfg.attn_dropout),
                c,
                int(c * cfg.mlp_ratio),
                dropout=cfg.dropout,
                drop_path=rate,
                norm_first=True,
                activation="gelu",
                layer_norm_eps=1e-6,
            )
            for rate in rates
        )
        self.norm = nn.LayerNorm(c, eps=1e-6)
        self.head = nn.Linear(c, cfg.num_classes)
        self.apply(self._init_weights)
        nn.init.trunc_normal_(self.cls_token, std=0.02)

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)

    def forward(
        self, images: Tensor, return_attention: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """images ``(B, C, H, W)`` -> logits ``(B, num_classes)``; with
        ``return_attention`` also each block's weights ``(B, heads, 1+P, 1+P)`` (token 0 is
        the class token, then patches in row-major order)."""
        cfg = self.config
        if images.dim() != 4 or images.shape[1:] != (cfg.in_chans, cfg.img_size, cfg.img_size):
            raise ValueError(
                f"expected images (B, {cfg.in_chans}, {cfg.img_size}, {cfg.img_size}), "
                f"got {tuple(images.shape)}"
            )
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # (B, P, C)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        x = self.pos_drop(x + self.pos_embed())
        attentions = []
        for block in self.blocks:
            x, w = block(x, need_weights=return_attention)
            if return_attention:
                attentions.append(w)
        logits = self.head(self.norm(x)[:, 0])
        return (logits, attentions) if return_attention else logits


def vit_from_name(name: str, **overrides: object) -> VisionTransformer:
    """Build a named configuration (``VIT_CONFIGS``), with field overrides."""
    if name not in VIT_CONFIGS:
        raise ValueError(f"unknown ViT configuration {name!r}; choose from {sorted(VIT_CONFIGS)}")
    return VisionTransformer(VIT_CONFIGS[name], **overrides)


def attention_rollout(attentions: list[Tensor], residual: bool = True) -> Tensor:
    """Attention rollout (Abnar & Zuidema, ACL 2020): how much each patch flows into the class
    token through all layers.

    Heads are averaged; with ``residual`` the identity is added for the skip connection and rows
    re-normalised (A' = (A + I) / 2); the layers' matrices are multiplied in order.

    Args:
        attentions: per layer ``(B, H, N, N)`` with token 0 the class token.
    Returns:
        ``(B, N - 1)`` non-negative relevance of each patch, summing to at most 1.
    """
    if not attentions:
        raise ValueError("attention_rollout needs at least one layer's weights")
    b, _, n, _ = attentions[0].shape
    eye = torch.eye(n, dtype=attentions[0].dtype, device=attentions[0].device)
    rollout = eye.expand(b, n, n)
    for w in attentions:
        a = w.mean(1)
        if residual:
            a = 0.5 * (a + eye)
            a = a / a.sum(-1, keepdim=True)
        rollout = a @ rollout
    return rollout[:, 0, 1:]


def config_dict(cfg: ViTConfig) -> dict[str, object]:
    """Plain-dict form (stored in checkpoints)."""
    return asdict(cfg)
