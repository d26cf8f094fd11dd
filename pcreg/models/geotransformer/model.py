"""The registration network: KPConv FPN -> geometric transformer -> superpoint matching ->
optimal-transport point matching -> local-to-global registration (Qin et al., CVPR 2022).

Batches: the backbone runs on packed clouds (a pyramid over ``2B`` items, the B references
first, then the B sources); the transformer on padded superpoints with valid masks; matching
and LGR per pair. ``forward`` never needs ground truth; for training, pass the ground-truth
superpoint correspondences (``node_correspondences``) to use them instead of the predicted ones
(GeoTransformer's teacher forcing of the fine stage).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from pcreg.data.features import INPUT_FEATURE_DIMS
from pcreg.models.backbones.kpconv.fpn import KPConvFPN
from pcreg.models.geotransformer.config import ORIENTATION_SEARCHES, GeoTransformerConfig
from pcreg.models.geotransformer.lgr import local_to_global_registration
from pcreg.models.geotransformer.optimal_transport import (
    LearnableLogOptimalTransport,
    exp_or_zero,
)
from pcreg.models.geotransformer.point_matching import mutual_topk_correspondences
from pcreg.models.geotransformer.superpoint_matching import superpoint_matching
from pcreg.models.geotransformer.transformer import GeometricTransformer
from pcreg.ops.packing import lengths_to_offsets, packed_to_padded
from pcreg.ops.partition import Patches, partition_pair_batch
from pcreg.ops.pyramid import Pyramid, pyramid_items

__all__ = ["GeoTransformer", "Patches", "RegistrationOutput"]  # Patches re-exported


@dataclass
class RegistrationOutput:
    """Everything the losses and the user need (B pairs).

    transform ``(B, 4, 4)`` estimated ``T_ref_src``; ref_corr_points / src_corr_points /
    corr_scores: per pair ``(C_b, 3)``, ``(C_b, 3)``, ``(C_b,)`` dense correspondences and the
    LGR inlier mask ``corr_inliers``; ref_feats_c / src_feats_c ``(B, N, C)`` L2-normalised
    superpoint features with valid masks; ref_patches / src_patches per pair; node_corr: per pair
    ``(ref_idx, src_idx, score)`` superpoint correspondences used by the fine stage;
    matching_scores ``(P, K+1, K+1)`` log assignment (with dustbins) over all used patch pairs,
    patch_batch ``(P,)`` their pair index, ref/src_knn_points ``(P, K, 3)`` and knn_valid.
    """

    transform: Tensor
    ref_corr_points: list[Tensor]
    src_corr_points: list[Tensor]
    corr_scores: list[Tensor]
    corr_inliers: list[Tensor]
    ref_feats_c: Tensor
    src_feats_c: Tensor
    ref_valid_c: Tensor
    src_valid_c: Tensor
    ref_patches: list[Patches]
    src_patches: list[Patches]
    node_corr: list[tuple[Tensor, Tensor, Tensor]]
    matching_scores: Tensor
    patch_batch: Tensor
    ref_knn_points: Tensor
    src_knn_points: Tensor
    ref_knn_valid: Tensor
    src_knn_valid: Tensor


class GeoTransformer(nn.Module):
    """The full network. Build with a :class:`GeoTransformerConfig`."""

    def __init__(self, config: GeoTransformerConfig | None = None) -> None:
        super().__init__()
        cfg = config or GeoTransformerConfig()
        need = INPUT_FEATURE_DIMS.get(cfg.input_features)
        if need is None or cfg.input_dim != need:
            raise ValueError(
                f"input_features={cfg.input_features!r} needs input_dim "
                f"{need if need is not None else '?'} (one of {sorted(INPUT_FEATURE_DIMS)}), "
                f"got input_dim={cfg.input_dim}"
            )
        if cfg.orientation_search not in ORIENTATION_SEARCHES:
            raise ValueError(
                f"orientation_search must be one of {ORIENTATION_SEARCHES}, "
                f"got {cfg.orientation_search!r}"
            )
        self.config = cfg
        self.backbone = KPConvFPN(
            cfg.input_dim,
            cfg.output_dim,
            cfg.init_dim,
            cfg.kernel_size,
            cfg.init_radius * cfg.voxel_size,
            cfg.init_sigma * cfg.voxel_size,
            cfg.group_norm,
            cfg.num_stages,
            rotation_invariant=cfg.rotation_invariant,
            invariant_kernel=cfg.invariant_kernel,
        )
        self.transformer = GeometricTransformer(
            cfg.backbone_coarse_dim,
            cfg.hidden_dim,
            cfg.coarse_dim,
            cfg.num_heads,
            cfg.blocks,
            cfg.sigma_d,
            cfg.sigma_a,
            cfg.angle_k,
            cfg.reduction,
        )
        self.optimal_transport = LearnableLogOptimalTransport(cfg.sinkhorn_iterations)

    def _backbone_reusing_references(
        self, pyramid: Pyramid, feats: Tensor, b: int, cache: dict
    ) -> tuple[Tensor, Tensor]:
        """The backbone's ``(coarse, fine)`` with the first ``b`` items (references) from
        ``cache`` (filled on the first call) and the sources computed now (the backbone is
        not rotation-invariant)."""
        n_ref = int(pyramid.lengths[0][:b].sum())
        if "features" not in cache:
            cache["features"] = self.backbone(feats[:n_ref], pyramid_items(pyramid, 0, b))
        coarse_ref, fine_ref = cache["features"]
        coarse_src, fine_src = self.backbone(feats[n_ref:], pyramid_items(pyramid, b, 2 * b))
        return torch.cat([coarse_ref, coarse_src], 0), torch.cat([fine_ref, fine_src], 0)

    def forward(
        self,
        pyramid: Pyramid,
        feats: Tensor,
        batch_size: int,
        node_correspondences: list[tuple[Tensor, Tensor]] | None = None,
        hypothesis_cache: dict | None = None,
    ) -> RegistrationOutput:
        """Register ``batch_size`` pairs.

        Args:
            pyramid: built over ``2 * batch_size`` items (references first, then sources).
            feats: ``(ΣN_0, input_dim)`` input features (ones).
            node_correspondences: optional per-pair ``(ref_idx, src_idx)`` superpoint
                correspondences to use instead of the predicted ones (training).
            hypothesis_cache: a dict shared by calls on the same pyramid up to a rigid motion
                of each source (the orientation search's hypotheses: same references, sources
                rotated). The first call fills it with what does not depend on that motion,
                the references' backbone features and both clouds' geometric embeddings
                (distances and angles only), and later calls reuse them. Inference only.
        """
        cfg = self.config
        b = batch_size
        if pyramid.lengths[0].numel() != 2 * b:
            raise ValueError(
                f"the pyramid holds {pyramid.lengths[0].numel()} clouds, expected 2 x {b}"
            )
        if hypothesis_cache is None:
            coarse, fine = self.backbone(feats, pyramid)
        else:
            coarse, fine = self._backbone_reusing_references(pyramid, feats, b, hypothesis_cache)
        lens_c = pyramid.lengths[-1]
        pts_c, valid_c = packed_to_padded(pyramid.points[-1], lens_c)
        feats_c, _ = packed_to_padded(coarse, lens_c)
        embeddings = None
        if hypothesis_cache is not None:
            if "embeddings" not in hypothesis_cache:
                hypothesis_cache["embeddings"] = self.transformer.embed(
                    pts_c[:b], pts_c[b:], valid_c[:b], valid_c[b:]
                )
            embeddings = hypothesis_cache["embeddings"]
        ref_c, src_c = self.transformer(
            pts_c[:b], pts_c[b:], feats_c[:b], feats_c[b:], valid_c[:b], valid_c[b:], embeddings
        )
        ref_c = nn.functional.normalize(ref_c, dim=-1)
        src_c = nn.functional.normalize(src_c, dim=-1)
        ref_patches, src_patches = partition_pair_batch(pyramid, b, cfg.num_points_in_patch)

        fine_off = lengths_to_offsets(pyramid.lengths[1]).tolist()
        node_corr = []
        knn = {
            "ref_pts": [],
            "src_pts": [],
            "ref_valid": [],
            "src_valid": [],
            "ref_f": [],
            "src_f": [],
            "batch": [],
        }
        for i in range(b):
            rp, sp = ref_patches[i], src_patches[i]
            n_ref, n_src = rp.nodes.shape[0], sp.nodes.shape[0]
            if node_correspondences is not None:
                ri, si = node_correspondences[i]
                score = torch.ones(ri.shape[0], dtype=ref_c.dtype, device=ref_c.device)
            else:
                with torch.no_grad():
                    ri, si, score = superpoint_matching(
                        ref_c[i, :n_ref],
                        src_c[i, :n_src],
                        rp.node_valid & valid_c[i, :n_ref],
                        sp.node_valid & valid_c[b + i, :n_src],
                        cfg.num_correspondences,
                        cfg.dual_normalization,
                    )
            node_corr.append((ri, si, score))
            f_ref = fine[fine_off[i] : fine_off[i + 1]]
            f_src = fine[fine_off[b + i] : fine_off[b + i + 1]]
            f_ref = torch.cat([f_ref, f_ref.new_zeros(1, f_ref.shape[1])], 0)
            f_src = torch.cat([f_src, f_src.new_zeros(1, f_src.shape[1])], 0)
            knn["ref_f"].append(f_ref[rp.knn_indices[ri]])
            knn["src_f"].append(f_src[sp.knn_indices[si]])
            knn["ref_pts"].append(rp.knn_points[ri])
            knn["src_pts"].append(sp.knn_points[si])
            knn["ref_valid"].append(rp.knn_valid[ri])
            knn["src_valid"].append(sp.knn_valid[si])
            knn["batch"].append(torch.full((ri.shape[0],), i, dtype=torch.long, device=ri.device))
        cat = {k: torch.cat(v, 0) for k, v in knn.items()}
        width = cat["ref_f"].shape[-1]
        scores = torch.einsum("pkc,plc->pkl", cat["ref_f"], cat["src_f"]) / width**0.5
        log_assign = self.optimal_transport(scores, cat["ref_valid"], cat["src_valid"])

        with torch.no_grad():
            # below ~2e-35 exactly 0: no such entry passes the confidence threshold
            prob = exp_or_zero(log_assign[:, :-1, :-1])
            corr = mutual_topk_correspondences(
                prob,
                cat["ref_valid"],
                cat["src_valid"],
                cfg.topk,
                cfg.confidence_threshold,
                cfg.mutual,
            )
            p_idx, r_idx, s_idx = corr.nonzero(as_tuple=True)
            transforms, ref_cp, src_cp, cs, inl = [], [], [], [], []
            for i in range(b):
                sel = cat["batch"][p_idx] == i
                pi, ri, si = p_idx[sel], r_idx[sel], s_idx[sel]
                rpts = cat["ref_pts"][pi, ri]
                spts = cat["src_pts"][pi, si]
                w = prob[pi, ri, si]
                t, inliers = local_to_global_registration(
                    rpts,
                    spts,
                    w,
                    pi,
                    cfg.acceptance_radius,
                    cfg.min_correspondences,
                    cfg.refinement_steps,
                )
                transforms.append(t)
                ref_cp.append(rpts)
                src_cp.append(spts)
                cs.append(w)
                inl.append(inliers)
        return RegistrationOutput(
            transform=torch.stack(transforms),
            ref_corr_points=ref_cp,
            src_corr_points=src_cp,
            corr_scores=cs,
            corr_inliers=inl,
            ref_feats_c=ref_c,
            src_feats_c=src_c,
            ref_valid_c=valid_c[:b],
            src_valid_c=valid_c[b:],
            ref_patches=ref_patches,
            src_patches=src_patches,
            node_corr=node_corr,
            matching_scores=log_assign,
            patch_batch=cat["batch"],
            ref_knn_points=cat["ref_pts"],
            src_knn_points=cat["src_pts"],
            ref_knn_valid=cat["ref_valid"],
            src_knn_valid=cat["src_valid"],
        )
