"""Geometric structure embedding (GeoTransformer, Qin et al. CVPR 2022, §3.2, Eq. 3-5).

For superpoints p_i, p_j of one cloud: the pair-distance term ρ_ij = |p_i - p_j| / σ_d and, for
each of the k nearest neighbors p_x of p_i, the triplet angle α_ij^x = ∠(p_x - p_i, p_j - p_i)
/ σ_a. Both go through the sinusoidal encoding and a linear projection; the angle terms are
reduced over the k neighbors (max or mean) and added to the distance term. Everything depends
only on distances and angles, so the embedding is invariant to rigid motions of the cloud.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from pcreg.layers import sinusoidal_encoding, sinusoidal_linear

__all__ = ["GeometricStructureEmbedding"]


class GeometricStructureEmbedding(nn.Module):
    """Args:
    hidden_dim: embedding width (the transformer width).
    sigma_d: distance scale in metres (0.2 for 3DMatch, 4.8 for KITTI).
    sigma_a: angle scale in degrees (15).
    angle_k: neighbors per triplet angle (3).
    reduction: ``"max"`` or ``"mean"`` over the k angle embeddings.
    """

    def __init__(
        self, hidden_dim: int, sigma_d: float, sigma_a: float, angle_k: int, reduction: str = "max"
    ) -> None:
        super().__init__()
        if reduction not in ("max", "mean"):
            raise ValueError(f"reduction must be 'max' or 'mean', got {reduction!r}")
        self.hidden_dim, self.sigma_d, self.sigma_a = hidden_dim, sigma_d, sigma_a
        self.angle_k, self.reduction = angle_k, reduction
        self.proj_d = nn.Linear(hidden_dim, hidden_dim)
        self.proj_a = nn.Linear(hidden_dim, hidden_dim)
        self.row_block = 32  # query rows per block in forward (a speed knob, not a result knob)

    @torch.no_grad()
    def geometry(self, points: Tensor, valid: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Scaled distances ``(B, N, N)`` and scaled triplet angles ``(B, N, N, k)``.

        points ``(B, N, 3)``; ``valid (B, N)`` excludes padded superpoints from the k nearest
        neighbors. Clouds with fewer than k+1 valid points repeat their farthest neighbor.
        """
        n = points.shape[1]
        centred = points - points.mean(dim=1, keepdim=True)
        diff = centred[:, None, :, :] - centred[:, :, None, :]  # (B, N, N, 3): p_j - p_i at [i, j]
        dist = torch.linalg.vector_norm(diff, dim=-1)  # (B, N, N)
        k = min(self.angle_k, max(n - 1, 1))
        search = dist.clone()
        if valid is not None:
            search = search.masked_fill(~valid[:, None, :], float("inf"))
        # not its own neighbor (a mask, not an in-place fill of the diagonal view: the ONNX
        # export drops writes through views)
        own = torch.arange(n, device=points.device)
        search = search.masked_fill(own[:, None] == own[None, :], float("inf"))
        knn = search.topk(k, dim=-1, largest=False).indices  # (B, N, k)
        knn_vec = torch.gather(diff, 2, knn[..., None].expand(-1, -1, -1, 3))  # (B, N, k, 3)
        ref = knn_vec[:, :, None, :, :]  # (B, N, 1, k, 3)
        anc = diff[:, :, :, None, :]  # (B, N, N, 1, 3)
        sin = torch.linalg.vector_norm(
            torch.cross(ref.expand(-1, -1, n, -1, -1), anc.expand(-1, -1, -1, k, -1), dim=-1),
            dim=-1,
        )
        cos = (ref * anc).sum(-1)
        # atan2(0, 0) is 0 in torch and NaN in ONNX's decomposition (atan(y / x)): the anchor
        # itself (p_i - p_i = 0) gives both zero, and atan2(0, 1) is the same 0
        cos = torch.where((sin == 0) & (cos == 0), 1.0, cos)
        angles = torch.atan2(sin, cos)  # (B, N, N, k) in [0, pi]
        return dist / self.sigma_d, angles * (180.0 / math.pi) / self.sigma_a

    def forward(self, points: Tensor, valid: Tensor | None = None) -> Tensor:
        """points ``(B, N, 3)`` -> pair embeddings ``(B, N, N, hidden_dim)``.

        Computed in blocks of query rows (:attr:`row_block`) with
        :func:`~pcreg.layers.sinusoidal_linear` and a running max / sum over the k angles, so the
        ``(B, N, N, k, C)`` angle embedding is never built: for 362 superpoints it is 100 MB per
        cloud, and streaming it through memory cost more than the arithmetic.
        :meth:`forward_reference` is the plain formula (the equivalence tests compare them).
        """
        d_idx, a_idx = self.geometry(points, valid)
        b, n, k = d_idx.shape[0], d_idx.shape[1], a_idx.shape[-1]
        d_rows, a_rows = d_idx.reshape(b * n, n), a_idx.reshape(b * n, n, k)  # blocks span items
        blocks = []
        for start in range(0, b * n, self.row_block):
            rows = slice(start, start + self.row_block)
            emb = sinusoidal_linear(d_rows[rows], self.proj_d)
            a = sinusoidal_linear(a_rows[rows, :, 0], self.proj_a)
            for j in range(1, k):
                aj = sinusoidal_linear(a_rows[rows, :, j], self.proj_a)
                a = torch.maximum(a, aj) if self.reduction == "max" else a + aj
            blocks.append(emb + (a if self.reduction == "max" else a / k))
        out = blocks[0] if len(blocks) == 1 else torch.cat(blocks, 0)
        return out.view(b, n, n, -1)

    def forward_reference(self, points: Tensor, valid: Tensor | None = None) -> Tensor:
        """The embedding as the paper writes it, materialising every intermediate."""
        d_idx, a_idx = self.geometry(points, valid)
        emb = self.proj_d(sinusoidal_encoding(d_idx, self.hidden_dim))
        a = self.proj_a(sinusoidal_encoding(a_idx, self.hidden_dim))  # (B, N, N, k, C)
        a = a.max(dim=3).values if self.reduction == "max" else a.mean(dim=3)
        return emb + a
