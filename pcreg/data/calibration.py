"""Neighbor-limit calibration of a dataset (GeoTransformer calibrates once per dataset: the
per-stage neighbor cap that covers 80 % of neighborhoods, so KPConv's dense neighbor tensors
stay small without truncating typical neighborhoods)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from pcreg.ops.grid_subsample import grid_subsample
from pcreg.ops.pyramid import calibrate_neighbor_limits

__all__ = ["calibrate_dataset"]


def calibrate_dataset(
    dataset: Sequence,
    *,
    voxel_size: float,
    num_stages: int,
    search_radius: float,
    num_samples: int = 50,
    coverage: float = 0.8,
    seed: int = 0,
) -> list[int]:
    """Per-stage limits from up to ``num_samples`` random pairs of ``dataset`` (items
    ``(src, ref, T, ...)``); both clouds of a pair are voxelised at ``voxel_size`` first, as
    :func:`pcreg.data.collate.collate_pairs` does."""
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(dataset), min(num_samples, len(dataset)), replace=False)

    def samples():
        for i in picks:
            src, ref = dataset[int(i)][:2]
            for cloud in (ref, src):
                pts = torch.from_numpy(np.asarray(cloud, np.float32))
                down, _ = grid_subsample(pts, torch.tensor([len(pts)]), voxel_size)
                yield down

    return calibrate_neighbor_limits(
        samples(),
        num_stages=num_stages,
        voxel_size=voxel_size,
        radius=search_radius,
        coverage=coverage,
    )
