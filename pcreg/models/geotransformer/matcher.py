"""The matching part of the network: superpoint matching (GeoTransformer §3.3), then optimal
transport over the matched patches and dense point correspondences (§3.4).

Argument order is ``(src, ref)`` everywhere; score matrices keep the reference on the rows
(``(P, K_ref, K_src)``), as the optimal transport's dustbin layout expects.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from pcreg.models.geotransformer.optimal_transport import (
    LearnableLogOptimalTransport,
    exp_or_zero,
)
from pcreg.models.geotransformer.point_matching import mutual_topk_correspondences
from pcreg.models.geotransformer.superpoint_matching import superpoint_matching
from pcreg.ops.partition import Patches

__all__ = ["Matcher", "PatchPairs", "PointCorrespondences"]


@dataclass
class PatchPairs:
    """The patch pairs of superpoint correspondences over a batch, gathered and padded.

    ``src_points`` / ``ref_points`` ``(P, K, 3)`` patch points (zeros where invalid),
    ``src_valid`` / ``ref_valid`` ``(P, K)`` bool, ``src_feats`` / ``ref_feats``
    ``(P, K, C)`` fine features, ``batch (P,)`` int64 pair index of each patch pair.
    """

    src_points: Tensor
    ref_points: Tensor
    src_valid: Tensor
    ref_valid: Tensor
    src_feats: Tensor
    ref_feats: Tensor
    batch: Tensor


@dataclass
class PointCorrespondences:
    """Dense correspondences of all pairs, flattened: ``src_points`` / ``ref_points`` ``(C, 3)``,
    ``scores (C,)``, ``patch (C,)`` int64 the patch pair each came from."""

    src_points: Tensor
    ref_points: Tensor
    scores: Tensor
    patch: Tensor


class Matcher(nn.Module):
    """Superpoint correspondences -> patch pairs -> Sinkhorn scores -> dense correspondences.

    Args:
        num_correspondences: superpoint correspondences per pair (256 in GeoTransformer).
        dual_normalization: dual-normalised superpoint similarity.
        sinkhorn_iterations: iterations of the learnable optimal transport (100).
        topk: dense matches kept per row / column of a patch pair (3 indoor, 2 outdoor).
        confidence_threshold: lowest assignment probability kept (0.05).
        mutual: keep only mutual top-k matches.
    """

    def __init__(
        self,
        num_correspondences: int,
        dual_normalization: bool,
        sinkhorn_iterations: int,
        topk: int,
        confidence_threshold: float,
        mutual: bool,
    ) -> None:
        super().__init__()
        self.num_correspondences = num_correspondences
        self.dual_normalization = dual_normalization
        self.topk = topk
        self.confidence_threshold = confidence_threshold
        self.mutual = mutual
        self.optimal_transport = LearnableLogOptimalTransport(sinkhorn_iterations)

    @torch.no_grad()
    def superpoints(
        self,
        src_feats: Tensor,
        ref_feats: Tensor,
        src_valid: Tensor,
        ref_valid: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One pair's superpoint correspondences: ``(M, C)`` / ``(N, C)`` features and masks
        -> ``src_idx (k,)``, ``ref_idx (k,)`` int64 and ``scores (k,)``, best first."""
        return superpoint_matching(
            src_feats,
            ref_feats,
            src_valid,
            ref_valid,
            self.num_correspondences,
            self.dual_normalization,
        )

    @staticmethod
    def gather_patches(
        node_corr: list[tuple[Tensor, Tensor, Tensor]],
        src_patches: list[Patches],
        ref_patches: list[Patches],
        src_fine: list[Tensor],
        ref_fine: list[Tensor],
    ) -> PatchPairs:
        """The patches of each pair's superpoint correspondences ``(src_idx, ref_idx, score)``
        with their fine features (``src_fine[i] (N_i, C)``), concatenated over the batch."""
        parts: dict[str, list[Tensor]] = {f: [] for f in PatchPairs.__dataclass_fields__}
        for i, (si, ri, _) in enumerate(node_corr):
            sp, rp = src_patches[i], ref_patches[i]
            f_src = torch.cat([src_fine[i], src_fine[i].new_zeros(1, src_fine[i].shape[1])], 0)
            f_ref = torch.cat([ref_fine[i], ref_fine[i].new_zeros(1, ref_fine[i].shape[1])], 0)
            parts["src_feats"].append(f_src[sp.knn_indices[si]])
            parts["ref_feats"].append(f_ref[rp.knn_indices[ri]])
            parts["src_points"].append(sp.knn_points[si])
            parts["ref_points"].append(rp.knn_points[ri])
            parts["src_valid"].append(sp.knn_valid[si])
            parts["ref_valid"].append(rp.knn_valid[ri])
            parts["batch"].append(torch.full((ri.shape[0],), i, dtype=torch.long, device=ri.device))
        return PatchPairs(**{k: torch.cat(v, 0) for k, v in parts.items()})

    def assignment(self, patches: PatchPairs) -> Tensor:
        """``(P, K_ref + 1, K_src + 1)`` log assignment (with dustbins) of every patch pair:
        scaled feature similarity through the learnable optimal transport."""
        width = patches.ref_feats.shape[-1]
        scores = torch.einsum("pkc,plc->pkl", patches.ref_feats, patches.src_feats) / width**0.5
        return self.optimal_transport(scores, patches.ref_valid, patches.src_valid)

    @torch.no_grad()
    def correspondences(self, log_assign: Tensor, patches: PatchPairs) -> PointCorrespondences:
        """Mutual top-k confident matches of every patch pair, flattened."""
        # below ~2e-35 exactly 0: no such entry passes the confidence threshold
        prob = exp_or_zero(log_assign[:, :-1, :-1])
        corr = mutual_topk_correspondences(
            prob,
            src_valid=patches.src_valid,
            ref_valid=patches.ref_valid,
            k=self.topk,
            confidence_threshold=self.confidence_threshold,
            mutual=self.mutual,
        )
        p_idx, r_idx, s_idx = corr.nonzero(as_tuple=True)
        return PointCorrespondences(
            src_points=patches.src_points[p_idx, s_idx],
            ref_points=patches.ref_points[p_idx, r_idx],
            scores=prob[p_idx, r_idx, s_idx],
            patch=p_idx,
        )
