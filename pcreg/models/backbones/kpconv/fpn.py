"""KPConv feature pyramid (encoder / decoder) as used by GeoTransformer (Qin et al. 2022).

Stage 1: a KPConv block and a residual block at the input resolution. Stage s >= 2: a strided
residual block (pooling stage s-1 into stage s), then two residual blocks at stage s, with the
radius and sigma doubling per stage. Widths double per stage: stage s outputs ``init_dim * 2**s``.
The decoder upsamples (nearest) from the coarsest stage back to stage 2, concatenating the
encoder features of each stage (unary blocks; a plain linear head at stage 2).

Returns the coarse features (stage ``num_stages``, the superpoints) and the fine features
(stage 2, the points that are matched).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from pcreg.models.backbones.kpconv.blocks import (
    ConvBlock,
    LastUnaryBlock,
    ResidualBlock,
    UnaryBlock,
    nearest_upsample,
)
from pcreg.models.backbones.kpconv.conv import KPConv
from pcreg.models.backbones.kpconv.frames import local_reference_frames
from pcreg.ops.pyramid import Pyramid

__all__ = ["KPConvFPN"]


class KPConvFPN(nn.Module):
    """Args:
    input_dim: input feature width (1: a constant 1 per point).
    output_dim: fine feature width (256 in GeoTransformer).
    init_dim: width of the first block (64); stage s outputs ``init_dim * 2**s``.
    kernel_size: kernel points (15). init_radius / init_sigma: stage-1 KPConv radius / sigma
    in metres (2.5 / 2.0 voxel sizes for 3DMatch). group_norm: groups (32).
    num_stages: 4 (3DMatch) or 5 (KITTI); must match the pyramid.
    rotation_invariant: express every KPConv's offsets in local reference frames
    (:mod:`pcreg.models.backbones.kpconv.frames`); off in the published configuration.
    invariant_kernel: with ``rotation_invariant``, ``"frame"`` uses the full local frame,
    ``"cylindrical"`` only its z axis (``KPConv.use_cylindrical_kernel``).
    """

    def __init__(
        self,
        input_dim: int,
        output_dim: int,
        init_dim: int,
        kernel_size: int,
        init_radius: float,
        init_sigma: float,
        group_norm: int,
        num_stages: int,
        rotation_invariant: bool = False,
        invariant_kernel: str = "frame",
    ) -> None:
        super().__init__()
        if invariant_kernel not in ("frame", "cylindrical"):
            raise ValueError(
                f"invariant_kernel must be frame or cylindrical, got {invariant_kernel!r}"
            )
        if invariant_kernel == "cylindrical" and not rotation_invariant:
            raise ValueError("invariant_kernel='cylindrical' needs rotation_invariant=True")
        self.rotation_invariant = rotation_invariant
        self.invariant_kernel = invariant_kernel
        # Non-strided KPConvs of a stage have the same radius, sigma and kernel disposition and
        # see the same points, so their influences are computed once per stage (stage 1's two
        # convs over ~30k x 32 neighbors x 15 kernel points were a fifth of the backbone).
        # False computes them per convolution (the equivalence tests compare the two).
        self.share_influence = True
        self.radii = [init_radius * 2**s for s in range(num_stages)]  # conv radius per stage
        if num_stages < 2:
            raise ValueError(f"the FPN needs at least 2 stages, got {num_stages}")
        self.num_stages = num_stages
        k, gn = kernel_size, group_norm

        def radius(s: int) -> tuple[float, float]:
            return init_radius * 2 ** (s - 1), init_sigma * 2 ** (s - 1)

        self.stages = nn.ModuleList()
        r, sg = radius(1)
        self.stages.append(
            nn.ModuleList(
                [
                    ConvBlock(input_dim, init_dim, k, r, sg, gn),
                    ResidualBlock(init_dim, 2 * init_dim, k, r, sg, gn),
                ]
            )
        )
        for s in range(2, num_stages + 1):
            d = init_dim * 2 ** (s - 1)
            (rp, sp), (r, sg) = radius(s - 1), radius(s)
            self.stages.append(
                nn.ModuleList(
                    [
                        ResidualBlock(d, d, k, rp, sp, gn, strided=True),
                        ResidualBlock(d, 2 * d, k, r, sg, gn),
                        ResidualBlock(2 * d, 2 * d, k, r, sg, gn),
                    ]
                )
            )
        # decoders[j] produces stage (num_stages - 1 - j), from stage num_stages-1 down to 2
        self.decoders = nn.ModuleList()
        for s in range(num_stages - 1, 1, -1):
            width_in = init_dim * 2 ** (s + 1) + init_dim * 2**s
            if s > 2:
                self.decoders.append(UnaryBlock(width_in, init_dim * 2**s, gn))
            else:
                self.decoders.append(LastUnaryBlock(width_in, output_dim))
        self.coarse_dim = init_dim * 2**num_stages
        self.fine_dim = output_dim
        if invariant_kernel == "cylindrical":
            for m in self.modules():
                if isinstance(m, KPConv):
                    m.use_cylindrical_kernel()

    def reference_frames(self, pyramid: Pyramid) -> tuple[list[Tensor], list[Tensor]]:
        """The local reference frames a rotation-invariant backbone uses: per stage ``i`` the
        frames of its points over their neighbors ``(N_i, 3, 3)``, and for stages ``i >= 1``
        over the previous stage's points they pool (``strided``, index ``i - 1``). Parameter
        free: the ONNX Runtime path computes the same in numpy and passes them in."""
        pts, nbrs = pyramid.points, pyramid.neighbors
        frames = [
            local_reference_frames(pts[i], pts[i], nbrs[i], self.radii[i])
            for i in range(self.num_stages)
        ]
        strided = [
            local_reference_frames(pts[i], pts[i - 1], pyramid.subsampling[i - 1], r)
            for i, r in zip(range(1, self.num_stages), self.radii, strict=False)
        ]
        return frames, strided

    def forward(
        self,
        feats: Tensor,
        pyramid: Pyramid,
        frames: tuple[list[Tensor], list[Tensor]] | None = None,
    ) -> tuple[Tensor, Tensor]:
        """feats ``(ΣN_0, input_dim)`` at pyramid stage 0 -> ``(coarse (ΣN_{S-1}, coarse_dim),
        fine (ΣN_1, output_dim))``. ``frames``: :meth:`reference_frames` of this pyramid when
        the caller has them (rotation-invariant backbones only; computed here otherwise)."""
        pts, lens, nbrs = pyramid.points, pyramid.lengths, pyramid.neighbors
        if len(pts) != self.num_stages:
            raise ValueError(f"pyramid has {len(pts)} stages, the backbone {self.num_stages}")
        strided = None
        if self.rotation_invariant:
            frames, strided_after = frames or self.reference_frames(pyramid)
            strided = [None, *strided_after]
        else:
            frames = None
        encoded = []
        x = feats
        for i, blocks in enumerate(self.stages):
            shared = None  # the stage's kernel influences, shared by its non-strided convs
            for j, block in enumerate(blocks):
                if j == 0 and i > 0:
                    x = block(
                        x,
                        pts[i],
                        pts[i - 1],
                        pyramid.subsampling[i - 1],
                        lens[i],
                        lens[i - 1],
                        strided and strided[i],
                    )
                    continue
                f = frames and frames[i]
                if self.share_influence and shared is None:
                    shared = block.conv.influence(pts[i], pts[i], nbrs[i], f)
                args = (x, pts[i], pts[i], nbrs[i], lens[i])
                args = args if i == 0 and j == 0 else (*args, lens[i])
                x = block(*args, f, influence=shared)
            encoded.append(x)
        coarse = encoded[-1]
        latent = coarse
        for j, decoder in enumerate(self.decoders):
            i = self.num_stages - 2 - j  # pyramid index of the stage being decoded
            up = nearest_upsample(latent, pyramid.upsampling[i])
            latent = decoder(torch.cat([up, encoded[i]], dim=1), lens[i])
        return coarse, latent
