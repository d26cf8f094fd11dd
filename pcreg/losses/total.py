"""The training objective: targets from the known transforms, coarse circle loss + fine
point-matching loss (GeoTransformer §3.6)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from pcreg.losses.circle import overlap_aware_circle_loss
from pcreg.losses.point_matching import point_matching_loss
from pcreg.losses.targets import NodeTargets, node_targets, sample_node_targets
from pcreg.ops.partition import partition_pair_batch
from pcreg.ops.pyramid import Pyramid

__all__ = ["LossConfig", "build_targets", "registration_loss"]


@dataclass(frozen=True)
class LossConfig:
    """GeoTransformer's 3DMatch values (KITTI: radii 0.6 m, ``log_scale`` 40)."""

    matching_radius: float = 0.05  # ground-truth superpoint overlap / point match radius (m)
    num_targets: int = 128  # superpoint pairs fed to the fine stage in training
    target_overlap: float = 0.1  # ... with at least this overlap
    positive_overlap: float = 0.1
    pos_margin: float = 0.1
    neg_margin: float = 1.4
    pos_optimal: float = 0.1
    neg_optimal: float = 1.4
    log_scale: float = 24.0
    coarse_weight: float = 1.0
    fine_weight: float = 1.0


def build_targets(
    pyramid: Pyramid,
    batch_size: int,
    transforms: Tensor,
    point_limit: int,
    cfg: LossConfig,
    generator: torch.Generator | Sequence[torch.Generator],
) -> tuple[list[NodeTargets], list[tuple[Tensor, Tensor]]]:
    """Per pair: all overlapping superpoint pairs (for the coarse loss) and the sampled
    correspondences to pass to ``forward(node_correspondences=...)``. ``generator``: one for
    the batch, or one per pair (so a pair's sample does not depend on its batch-mates)."""
    gens = [generator] * batch_size if isinstance(generator, torch.Generator) else list(generator)
    srcs, refs = partition_pair_batch(pyramid, batch_size, point_limit)
    targets = [
        node_targets(srcs[i], refs[i], transforms[i], cfg.matching_radius)
        for i in range(batch_size)
    ]
    sampled = [
        sample_node_targets(t, cfg.num_targets, cfg.target_overlap, g)
        for t, g in zip(targets, gens, strict=True)
    ]
    return targets, sampled


def registration_loss(out, transforms: Tensor, targets: list[NodeTargets], cfg: LossConfig):
    """``{"loss", "coarse_loss", "fine_loss"}`` of a :class:`RegistrationOutput`."""
    coarse = overlap_aware_circle_loss(
        out.src_feats_c,
        out.ref_feats_c,
        out.src_valid_c,
        out.ref_valid_c,
        targets,
        positive_overlap=cfg.positive_overlap,
        pos_margin=cfg.pos_margin,
        neg_margin=cfg.neg_margin,
        pos_optimal=cfg.pos_optimal,
        neg_optimal=cfg.neg_optimal,
        log_scale=cfg.log_scale,
    )
    # per-pair means, then the mean over pairs: a batch of B equals B batches of 1 (and a
    # B-rank DDP step), whatever the number of patches / labels of each pair
    fines = []
    for b in range(len(targets)):
        sel = out.patch_batch == b
        if bool(sel.any()):
            fines.append(
                point_matching_loss(
                    out.matching_scores[sel],
                    out.src_knn_points[sel],
                    out.ref_knn_points[sel],
                    out.src_knn_valid[sel],
                    out.ref_knn_valid[sel],
                    transforms[out.patch_batch[sel]],
                    cfg.matching_radius,
                )
            )
    fine = torch.stack(fines).mean() if fines else out.matching_scores.sum() * 0.0
    loss = cfg.coarse_weight * coarse + cfg.fine_weight * fine
    return {"loss": loss, "coarse_loss": coarse, "fine_loss": fine}
