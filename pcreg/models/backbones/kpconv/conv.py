"""Rigid kernel point convolution (KPConv; Thomas et al., ICCV 2019, Eq. 1-3)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from pcreg.models.backbones.kpconv.kernel_points import cylindrical_kernel_points, kernel_points

__all__ = ["KPConv", "gather_with_shadow"]


def gather_with_shadow(feats: Tensor, indices: Tensor) -> Tensor:
    """Rows of ``feats (N, C)`` at ``indices (M, H)``, where index ``N`` (the shadow neighbor)
    reads a zero row -> ``(M, H, C)``. (``index_select`` on the flattened indices: up to 4x
    faster than advanced indexing on CPU for these shapes.)"""
    padded = torch.cat([feats, feats.new_zeros(1, feats.shape[1])], 0)
    return padded.index_select(0, indices.reshape(-1)).view(*indices.shape, feats.shape[1])


class KPConv(nn.Module):
    """g(x) = Σ_j Σ_k max(0, 1 - |x_j - x - x̃_k| / σ) W_k f_j, averaged over real neighbors.

    ``x̃_k`` are the kernel points (a buffer: the unit disposition times ``radius``), ``σ`` the
    influence distance. Neighbor index rows use the shadow index ``len(support)`` for padding;
    shadow rows contribute nothing and are not counted. (GeoTransformer divides by the number of
    neighbors whose feature sum is positive — almost always the same count; ours is the one the
    KPConv paper means.)

    Args:
        in_channels, out_channels: feature widths.
        kernel_size: number of kernel points (15 in GeoTransformer).
        radius: kernel radius in metres. sigma: influence distance in metres.
        bias: add a learned bias.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        radius: float,
        sigma: float,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.radius, self.sigma = kernel_size, radius, sigma
        self.weights = nn.Parameter(torch.empty(kernel_size, in_channels, out_channels))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        nn.init.kaiming_uniform_(self.weights, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(in_channels * out_channels)  # torch's fan-in of (K, Cin, Cout)
            nn.init.uniform_(self.bias, -bound, bound)
        self.register_buffer("kernel_points", torch.from_numpy(kernel_points(kernel_size)) * radius)
        # cylindrical: offsets are reduced to (ρ, 0, h) about the frame's z axis before the
        # kernel is applied (see :meth:`use_cylindrical_kernel`)
        self.cylindrical = False

    def use_cylindrical_kernel(self) -> None:
        """Switch to a kernel that needs only the frame's z axis (the local normal).

        Offsets ``d`` in the local frame become ``(ρ, 0, h)`` with ``h = d_z`` and ``ρ`` the
        in-plane distance, and the kernel points are placed in that half-plane
        (:func:`~pcreg.models.backbones.kpconv.kernel_points.cylindrical_kernel_points`). The
        convolution is then blind to the in-plane axes, which on the flat patches that
        dominate rooms are ill-defined: measured on generated rooms at 2.5 cm under random
        rotations, the full SHOT frames of corresponding stage-1 points agree within 15 deg for
        only 5 % of them (27 % even after allowing axis sign flips and x/y swaps), their z axes
        for 76 % (docs/training/indoor-experiments.md). Must be called before training or loading
        (the kernel points are a buffer, saved with the weights).
        """
        unit = torch.from_numpy(cylindrical_kernel_points(self.kernel_size))
        self.kernel_points = unit.to(self.kernel_points) * self.radius
        self.cylindrical = True

    def influence(
        self,
        q_points: Tensor,
        s_points: Tensor,
        neighbor_indices: Tensor,
        frames: Tensor | None = None,
    ) -> Tensor:
        """Kernel influences ``max(0, 1 - |x_j - x - x̃_k| / σ)``, ``(M, H, K)``.

        They depend only on the points, the neighbors and the kernel (not on features or
        learned weights), so every KPConv of a stage with the same radius / sigma can share one
        computation (:class:`~pcreg.models.backbones.kpconv.fpn.KPConvFPN` does). Shapes as in
        :meth:`forward`; the shadow neighbor gets influence 0.
        """
        # shadow row: a point far outside every kernel (zero influence)
        far = torch.full_like(s_points[:1], 1e6)
        rel = torch.cat([s_points, far], 0)[neighbor_indices] - q_points[:, None, :]  # (M, H, 3)
        if frames is not None:  # rotation preserves |rel|: the shadow stays far away
            rel = torch.bmm(rel, frames.to(rel.dtype))
        if self.cylindrical:
            if frames is None:
                raise ValueError("a cylindrical KPConv needs local frames (rotation_invariant)")
            # vector_norm's gradient at 0 is 0 (a neighbor on the axis): sqrt's would be inf
            rho = torch.linalg.vector_norm(rel[..., :2], dim=-1)
            rel = torch.stack([rho, torch.zeros_like(rho), rel[..., 2]], -1)
        kp = self.kernel_points.to(rel.dtype)
        # |rel - kp|² = |rel|² - 2 rel·kp + |kp|² as one GEMM over augmented coordinates;
        # rel is query-centred, so float32 has no cancellation problem here.
        ones = torch.ones_like(rel[..., :1])
        lhs = torch.cat([rel, rel.square().sum(-1, keepdim=True), ones], -1)  # (M, H, 5)
        rhs = torch.cat([-2.0 * kp.T, torch.ones_like(kp[:, :1]).T, kp.square().sum(-1)[None]])
        sq = lhs @ rhs  # (M, H, K)
        if sq.requires_grad:  # coordinates that need gradients: no in-place ops
            return torch.relu(1.0 - torch.sqrt(torch.relu(sq)) / self.sigma)
        # in place: each of these passes over (M, H, K) would otherwise allocate a fresh copy
        return sq.clamp_(min=0).sqrt_().mul_(-1.0 / self.sigma).add_(1.0).clamp_(min=0)

    def forward(
        self,
        s_feats: Tensor,
        q_points: Tensor,
        s_points: Tensor,
        neighbor_indices: Tensor,
        frames: Tensor | None = None,
        influence: Tensor | None = None,
    ) -> Tensor:
        """s_feats ``(N, Cin)``, q_points ``(M, 3)``, s_points ``(N, 3)``, neighbor_indices
        ``(M, H)`` int64 into ``s_points`` (shadow ``N``). With ``frames (M, 3, 3)`` (columns:
        local axes, :func:`~pcreg.models.backbones.kpconv.frames.local_reference_frames`) the
        offsets are expressed in them, which makes the convolution rotation invariant.
        ``influence (M, H, K)``: this convolution's :meth:`influence` for these points, when
        already computed by a sibling convolution (then points and frames are not read again).
        Returns ``(M, Cout)``."""
        n = s_points.shape[0]
        if influence is None:
            influence = self.influence(q_points, s_points, neighbor_indices, frames)
        feats = gather_with_shadow(s_feats, neighbor_indices)  # (M, H, Cin)
        m = feats.shape[0]
        if feats.shape[2] == 1:
            # one input channel (the first convolution, on ones): the same sums as row vectors,
            # (M, 1, H) @ (M, H, K), which torch's CPU bmm runs ~4x faster than the
            # (M, K, H) @ (M, H, 1) mat-vecs (2.3 -> 0.6 ms on a 3DMatch fragment's stage 0)
            weighted = torch.bmm(feats.transpose(1, 2), influence)  # (M, 1, K) = (M, K, Cin)
        else:
            weighted = torch.bmm(influence.transpose(1, 2), feats)  # (M, K, Cin)
        out = weighted.reshape(m, -1) @ self.weights.reshape(-1, self.out_channels)  # (M, Cout)
        count = (neighbor_indices < n).sum(1, keepdim=True).clamp(min=1).to(out.dtype)
        out = out / count
        if self.bias is not None:
            out = out + self.bias
        return out

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"radius={self.radius:g}, sigma={self.sigma:g}, bias={self.bias is not None}"
        )
