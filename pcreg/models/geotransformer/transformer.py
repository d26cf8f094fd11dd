"""The geometric transformer (GeoTransformer §3.2): interleaved self-attention with the
geometric structure embedding (``pcreg.layers.RelativePositionAttention``) and plain
cross-attention between the two clouds, post-norm layers with a 2x-wide ReLU feed-forward."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from pcreg.layers import MultiHeadAttention, RelativePositionAttention, TransformerLayer
from pcreg.models.geotransformer.embedding import GeometricStructureEmbedding

__all__ = ["GeometricTransformer"]


class GeometricTransformer(nn.Module):
    """Args:
    input_dim: backbone coarse width (1024 / 2048). hidden_dim: attention width (256 / 128).
    output_dim: superpoint feature width (256). num_heads: 4.
    blocks: e.g. ``("self", "cross") * 3``. sigma_d, sigma_a, angle_k, reduction: embedding.
    dropout: inside the layers (GeoTransformer uses none).
    """

    def __init__(
        self,
        input_dim: int,
        hidden_dim: int,
        output_dim: int,
        num_heads: int,
        blocks: Sequence[str],
        sigma_d: float,
        sigma_a: float,
        angle_k: int,
        reduction: str = "max",
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        for block in blocks:
            if block not in ("self", "cross"):
                raise ValueError(f"unknown transformer block {block!r} (use 'self' or 'cross')")
        self.blocks = tuple(blocks)
        self.embedding = GeometricStructureEmbedding(
            hidden_dim, sigma_d, sigma_a, angle_k, reduction
        )
        self.in_proj = nn.Linear(input_dim, hidden_dim)
        self.layers = nn.ModuleList(
            TransformerLayer(
                (RelativePositionAttention if block == "self" else MultiHeadAttention)(
                    hidden_dim, num_heads, dropout
                ),
                hidden_dim,
                2 * hidden_dim,
                dropout=dropout,
                norm_first=False,
                activation="relu",
            )
            for block in self.blocks
        )
        self.out_proj = nn.Linear(hidden_dim, output_dim)

    def forward(
        self,
        src_points: Tensor,
        ref_points: Tensor,
        src_feats: Tensor,
        ref_feats: Tensor,
        src_valid: Tensor,
        ref_valid: Tensor,
        embeddings: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Padded superpoints: points ``(B, M, 3)`` / ``(B, N, 3)``, feats ``(B, M, Cin)`` /
        ``(B, N, Cin)``, valid masks (True = real). Returns ``(B, M, Cout)``, ``(B, N, Cout)``
        (source, reference). In each cross block the reference is updated first and the
        source's cross-attention reads the updated reference (GeoTransformer's sequential
        order).

        ``embeddings``: the ``(src, ref)`` embeddings from :meth:`embed` when the caller
        already has them for these points, or for points differing only by a rigid motion per
        cloud (the embedding is invariant to it); None computes them."""
        if embeddings is None:
            embeddings = self.embed(src_points, ref_points, src_valid, ref_valid)
        src_emb, ref_emb = embeddings
        ref, src = self.in_proj(ref_feats), self.in_proj(src_feats)
        ref_pad, src_pad = ~ref_valid, ~src_valid
        for block, layer in zip(self.blocks, self.layers, strict=True):
            if block == "self":
                ref, _ = layer(ref, pair_embedding=ref_emb, key_padding_mask=ref_pad)
                src, _ = layer(src, pair_embedding=src_emb, key_padding_mask=src_pad)
            else:
                ref, _ = layer(ref, src, key_padding_mask=src_pad)
                src, _ = layer(src, ref, key_padding_mask=ref_pad)
        return self.out_proj(src), self.out_proj(ref)

    def embed(
        self, src_points: Tensor, ref_points: Tensor, src_valid: Tensor, ref_valid: Tensor
    ) -> tuple[Tensor, Tensor]:
        """The geometric structure embeddings ``(B, M, M, hidden)``, ``(B, N, N, hidden)``."""
        return self.embedding(src_points, src_valid), self.embedding(ref_points, ref_valid)
