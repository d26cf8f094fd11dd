"""Batching of registration pairs: voxelise, pack and build the neighbor pyramid."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from pcreg.ops.features import input_features as compute_input_features
from pcreg.ops.grid_subsample import grid_subsample
from pcreg.ops.pyramid import Pyramid, build_pyramid

__all__ = ["PairBatch", "PyramidSettings", "collate_pairs"]


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


class PyramidSettings(Protocol):
    """What batching needs from a model configuration (a
    :class:`~pcreg.models.geotransformer.GeoTransformerConfig` provides it): the voxel and
    pyramid the backbone was trained with, and the input features."""

    voxel_size: float
    num_stages: int
    neighbor_limits: Sequence[int]
    input_features: str
    fpfh_radii: Sequence[float]

    @property
    def search_radius(self) -> float: ...


def collate_pairs(
    srcs: Sequence[Tensor],
    refs: Sequence[Tensor],
    cfg: PyramidSettings,
    *,
    transforms: Sequence[Tensor] | Tensor | None = None,
    backend: str = "auto",
) -> PairBatch:
    """Voxelise each cloud at ``cfg.voxel_size`` (one centroid per voxel), build the neighbor
    pyramid and the input features (:func:`pcreg.data.features.input_features`).

    srcs / refs: B clouds ``(N_i, 3)`` each (metres; cast to float32). transforms: optional B
    ground-truth ``T_ref_src`` ``(4, 4)``. The batch packs the references first, then the
    sources (the layout :class:`~pcreg.models.geotransformer.GeoTransformer` expects).
    """
    if len(refs) != len(srcs) or not refs:
        raise ValueError(
            f"need the same non-zero number of srcs and refs, got {len(srcs)}/{len(refs)}"
        )
    clouds = [*refs, *srcs]
    points = torch.cat([torch.as_tensor(c).to(torch.float32) for c in clouds], 0)
    lengths = torch.tensor([c.shape[0] for c in clouds], dtype=torch.long)
    points, lengths = grid_subsample(points, lengths, cfg.voxel_size)
    pyramid = build_pyramid(
        points,
        lengths,
        num_stages=cfg.num_stages,
        voxel_size=cfg.voxel_size,
        radius=cfg.search_radius,
        neighbor_limits=list(cfg.neighbor_limits),
        backend=backend,
    )
    feats = compute_input_features(points, lengths, cfg.input_features, tuple(cfg.fpfh_radii))
    tr = None
    if transforms is not None:
        tr = torch.stack(list(transforms)) if not isinstance(transforms, Tensor) else transforms
        tr = tr.to(torch.float32)
    return PairBatch(pyramid, feats, len(refs), tr)
