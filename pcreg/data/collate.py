"""Batching of registration pairs: voxelise, pack and build the neighbor pyramid."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from pcreg.data.features import input_features as compute_input_features
from pcreg.ops.grid_subsample import grid_subsample
from pcreg.ops.pyramid import Pyramid, build_pyramid

__all__ = ["PairBatch", "collate_pairs"]


@dataclass
class PairBatch:
    """A batch of B pairs ready for the network.

    pyramid: over ``2B`` clouds, the B references first, then the B sources (stage 0 is the
    voxelised input). feats: ``(ΣN_0, C)`` (:mod:`pcreg.data.features`; ones by default).
    transforms: ground-truth ``T_ref_src`` ``(B, 4, 4)`` when known (training / evaluation),
    else None.
    """

    pyramid: Pyramid
    feats: Tensor
    batch_size: int
    transforms: Tensor | None = None

    def to(self, device: torch.device | str) -> PairBatch:
        p = self.pyramid
        moved = Pyramid(*[[t.to(device) for t in field] for field in p])
        tr = None if self.transforms is None else self.transforms.to(device)
        return PairBatch(moved, self.feats.to(device), self.batch_size, tr)


def collate_pairs(
    refs: Sequence[Tensor],
    srcs: Sequence[Tensor],
    *,
    voxel_size: float,
    num_stages: int,
    search_radius: float,
    neighbor_limits: Sequence[int],
    transforms: Sequence[Tensor] | Tensor | None = None,
    backend: str = "auto",
    input_features: str = "ones",
    fpfh_radii: Sequence[float] = (0.1, 0.25),
) -> PairBatch:
    """Voxelise each cloud at ``voxel_size`` (one centroid per voxel) and build the pyramid.

    input_features / fpfh_radii: the per-point features
    (:func:`pcreg.data.features.input_features`).

    refs / srcs: B clouds ``(N_i, 3)`` float32 each (metres). transforms: optional B ``(4, 4)``.
    """
    if len(refs) != len(srcs) or not refs:
        raise ValueError(
            f"need the same non-zero number of refs and srcs, got {len(refs)}/{len(srcs)}"
        )
    clouds = [*refs, *srcs]
    points = torch.cat([c.to(torch.float32) for c in clouds], 0)
    lengths = torch.tensor([c.shape[0] for c in clouds], dtype=torch.long)
    points, lengths = grid_subsample(points, lengths, voxel_size)
    pyramid = build_pyramid(
        points,
        lengths,
        num_stages=num_stages,
        voxel_size=voxel_size,
        radius=search_radius,
        neighbor_limits=list(neighbor_limits),
        backend=backend,
    )
    feats = compute_input_features(points, lengths, input_features, tuple(fpfh_radii))
    tr = None
    if transforms is not None:
        tr = torch.stack(list(transforms)) if not isinstance(transforms, Tensor) else transforms
        tr = tr.to(torch.float32)
    return PairBatch(pyramid, feats, len(refs), tr)
