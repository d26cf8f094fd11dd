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

from pcreg.models.backbones.kpconv.fpn import KPConvFPN
from pcreg.models.geotransformer.config import GeoTransformerConfig
from pcreg.models.geotransformer.lgr import LocalToGlobalEstimator
from pcreg.models.geotransformer.matcher import Matcher, PatchPairs
from pcreg.models.geotransformer.transformer import GeometricTransformer
from pcreg.ops.features import INPUT_FEATURE_DIMS
from pcreg.ops.packing import lengths_to_offsets, packed_to_padded
from pcreg.ops.partition import Patches, partition_pair_batch
from pcreg.ops.pyramid import Pyramid, pyramid_items

__all__ = [
    "GeoTransformer",
    "Patches",  # re-exported
    "ReferenceEncoding",
    "RegistrationOutput",
    "build_geotransformer",
    "upgrade_state_dict",
]


@dataclass
class RegistrationOutput:
    """Everything the losses and the user need (B pairs).

    transform ``(B, 4, 4)`` estimated ``T_ref_src``; src_corr_points / ref_corr_points /
    corr_scores: per pair ``(C_b, 3)``, ``(C_b, 3)``, ``(C_b,)`` dense correspondences and the
    LGR inlier mask ``corr_inliers``; src_feats_c / ref_feats_c ``(B, M, C)`` / ``(B, N, C)``
    L2-normalised superpoint features with valid masks; src_patches / ref_patches per pair;
    node_corr: per pair ``(src_idx, ref_idx, score)`` superpoint correspondences used by the
    fine stage; matching_scores ``(P, K+1, K+1)`` log assignment (reference rows, source
    columns, with dustbins) over all used patch pairs, patch_batch ``(P,)`` their pair index,
    src/ref_knn_points ``(P, K, 3)`` and knn_valid.
    """

    transform: Tensor
    src_corr_points: list[Tensor]
    ref_corr_points: list[Tensor]
    corr_scores: list[Tensor]
    corr_inliers: list[Tensor]
    src_feats_c: Tensor
    ref_feats_c: Tensor
    src_valid_c: Tensor
    ref_valid_c: Tensor
    src_patches: list[Patches]
    ref_patches: list[Patches]
    node_corr: list[tuple[Tensor, Tensor, Tensor]]
    matching_scores: Tensor
    patch_batch: Tensor
    src_knn_points: Tensor
    ref_knn_points: Tensor
    src_knn_valid: Tensor
    ref_knn_valid: Tensor


@dataclass(frozen=True)
class ReferenceEncoding:
    """What a forward pass computes that a rigid motion of the sources does not change.

    The orientation search runs the network on one pair under several rotations of the
    source: the references' backbone features and both clouds' geometric structure embeddings
    (distances and angles only, invariant to a rigid motion of each cloud; GeoTransformer §3.2)
    are the same for every hypothesis. :meth:`GeoTransformer.encode_reference` computes them
    once; :meth:`GeoTransformer.forward` takes them through ``reference=``.

    ref_coarse ``(ΣN_c, C_c)`` / ref_fine ``(ΣN_1, C_f)``: the references' backbone outputs
    (packed over the batch); src_embedding ``(B, M, M, H)`` / ref_embedding ``(B, N, N, H)``.
    """

    ref_coarse: Tensor
    ref_fine: Tensor
    src_embedding: Tensor
    ref_embedding: Tensor


@dataclass
class _Superpoints:
    """Padded superpoints of a batch: ``points (2B, S, 3)``, ``feats (2B, S, C)``, ``valid
    (2B, S)`` (references first, as packed in the pyramid)."""

    points: Tensor
    feats: Tensor
    valid: Tensor


class GeoTransformer(nn.Module):
    """The full network, built from its parts (:func:`build_geotransformer` builds them from a
    :class:`GeoTransformerConfig`).

    Args:
        config: the architecture configuration the parts were built from (kept for checkpoints
            and preprocessing: voxel size, pyramid, patch size).
        backbone: KPConv FPN: ``(features, pyramid) -> (coarse, fine)`` packed features.
        transformer: geometric transformer over the padded superpoints.
        matcher: superpoint matching, optimal transport and dense correspondences.
        estimator: local-to-global registration of one pair's correspondences.
    """

    def __init__(
        self,
        config: GeoTransformerConfig,
        backbone: nn.Module,
        transformer: GeometricTransformer,
        matcher: Matcher,
        estimator: LocalToGlobalEstimator,
    ) -> None:
        super().__init__()
        self.config = config
        self.backbone = backbone
        self.transformer = transformer
        self.matcher = matcher
        self.estimator = estimator
        self.register_load_state_dict_pre_hook(_rename_legacy_keys)

    def encode_reference(
        self, pyramid: Pyramid, feats: Tensor, batch_size: int
    ) -> ReferenceEncoding:
        """The :class:`ReferenceEncoding` of a collated batch (pyramid over ``2 * batch_size``
        clouds, references first)."""
        b = batch_size
        n_ref = int(pyramid.lengths[0][:b].sum())
        ref_coarse, ref_fine = self.backbone(feats[:n_ref], pyramid_items(pyramid, 0, b))
        pts_c, valid_c = packed_to_padded(pyramid.points[-1], pyramid.lengths[-1])
        src_emb, ref_emb = self.transformer.embed(pts_c[b:], pts_c[:b], valid_c[b:], valid_c[:b])
        return ReferenceEncoding(ref_coarse, ref_fine, src_emb, ref_emb)

    def forward(
        self,
        pyramid: Pyramid,
        feats: Tensor,
        batch_size: int,
        node_correspondences: list[tuple[Tensor, Tensor]] | None = None,
        reference: ReferenceEncoding | None = None,
    ) -> RegistrationOutput:
        """Register ``batch_size`` pairs.

        Args:
            pyramid: built over ``2 * batch_size`` clouds (the packed layout of
                :func:`pcreg.data.collate.collate_pairs`: references first, then sources).
            feats: ``(ΣN_0, input_dim)`` input features (ones).
            node_correspondences: optional per-pair ``(src_idx, ref_idx)`` superpoint
                correspondences to use instead of the predicted ones (training).
            reference: from :meth:`encode_reference` on this pyramid up to a rigid motion of
                each source (inference only): its parts are reused instead of recomputed.
        """
        b = batch_size
        if pyramid.lengths[0].numel() != 2 * b:
            raise ValueError(
                f"the pyramid holds {pyramid.lengths[0].numel()} clouds, expected 2 x {b}"
            )
        coarse, fine = self._backbone(pyramid, feats, b, reference)
        superpoints = self._superpoints(pyramid, coarse)
        src_c, ref_c = self.coarse_matching(superpoints, b, reference)
        src_patches, ref_patches, node_corr = self._node_correspondences(
            pyramid, superpoints, src_c, ref_c, b, node_correspondences
        )
        fine_off = lengths_to_offsets(pyramid.lengths[1]).tolist()
        fine_items = [fine[fine_off[i] : fine_off[i + 1]] for i in range(2 * b)]
        patches = self.matcher.gather_patches(
            node_corr, src_patches, ref_patches, fine_items[b:], fine_items[:b]
        )
        log_assign = self.matcher.assignment(patches)  # (P, K+1, K+1)
        estimate = self.estimate(log_assign, patches, b)
        return RegistrationOutput(
            transform=estimate["transform"],
            src_corr_points=estimate["src"],
            ref_corr_points=estimate["ref"],
            corr_scores=estimate["scores"],
            corr_inliers=estimate["inliers"],
            src_feats_c=src_c,
            ref_feats_c=ref_c,
            src_valid_c=superpoints.valid[b:],
            ref_valid_c=superpoints.valid[:b],
            src_patches=src_patches,
            ref_patches=ref_patches,
            node_corr=node_corr,
            matching_scores=log_assign,
            patch_batch=patches.batch,
            src_knn_points=patches.src_points,
            ref_knn_points=patches.ref_points,
            src_knn_valid=patches.src_valid,
            ref_knn_valid=patches.ref_valid,
        )

    def _backbone(
        self, pyramid: Pyramid, feats: Tensor, b: int, reference: ReferenceEncoding | None
    ) -> tuple[Tensor, Tensor]:
        """Packed ``(coarse, fine)`` backbone features of all ``2b`` clouds; with a
        ``reference`` only the sources' are computed."""
        if reference is None:
            return self.backbone(feats, pyramid)
        n_ref = int(pyramid.lengths[0][:b].sum())
        coarse_src, fine_src = self.backbone(feats[n_ref:], pyramid_items(pyramid, b, 2 * b))
        return (
            torch.cat([reference.ref_coarse, coarse_src], 0),
            torch.cat([reference.ref_fine, fine_src], 0),
        )

    @staticmethod
    def _superpoints(pyramid: Pyramid, coarse: Tensor) -> _Superpoints:
        lens_c = pyramid.lengths[-1]
        points, valid = packed_to_padded(pyramid.points[-1], lens_c)  # (2B, S, 3), (2B, S)
        feats, _ = packed_to_padded(coarse, lens_c)  # (2B, S, C_c)
        return _Superpoints(points, feats, valid)

    def coarse_matching(
        self, sp: _Superpoints, b: int, reference: ReferenceEncoding | None = None
    ) -> tuple[Tensor, Tensor]:
        """Superpoint features after the geometric transformer, L2-normalised: ``(B, M, C)``
        sources and ``(B, N, C)`` references."""
        embeddings = (
            None if reference is None else (reference.src_embedding, reference.ref_embedding)
        )
        src_c, ref_c = self.transformer(
            sp.points[b:], sp.points[:b], sp.feats[b:], sp.feats[:b], sp.valid[b:], sp.valid[:b],
            embeddings,
        )  # fmt: skip
        return nn.functional.normalize(src_c, dim=-1), nn.functional.normalize(ref_c, dim=-1)

    def _node_correspondences(
        self,
        pyramid: Pyramid,
        sp: _Superpoints,
        src_c: Tensor,
        ref_c: Tensor,
        b: int,
        given: list[tuple[Tensor, Tensor]] | None,
    ) -> tuple[list[Patches], list[Patches], list[tuple[Tensor, Tensor, Tensor]]]:
        """Each cloud's patches and each pair's superpoint correspondences ``(src_idx,
        ref_idx, score)``: predicted, or ``given`` (scores 1)."""
        src_patches, ref_patches = partition_pair_batch(pyramid, b, self.config.num_points_in_patch)
        node_corr = []
        for i in range(b):
            sp_i, rp_i = src_patches[i], ref_patches[i]
            if given is not None:
                si, ri = given[i]
                node_corr.append(
                    (si, ri, torch.ones(ri.shape[0], dtype=ref_c.dtype, device=ref_c.device))
                )
                continue
            n_src, n_ref = sp_i.nodes.shape[0], rp_i.nodes.shape[0]
            node_corr.append(
                self.matcher.superpoints(
                    src_c[i, :n_src],
                    ref_c[i, :n_ref],
                    sp_i.node_valid & sp.valid[b + i, :n_src],
                    rp_i.node_valid & sp.valid[i, :n_ref],
                )
            )
        return src_patches, ref_patches, node_corr

    @torch.no_grad()
    def estimate(self, log_assign: Tensor, patches: PatchPairs, b: int) -> dict:
        """Dense correspondences and each pair's transform (local-to-global registration):
        ``transform (B, 4, 4)`` and per pair ``src``/``ref`` ``(C_i, 3)``, ``scores (C_i,)``,
        ``inliers (C_i,)``."""
        corr = self.matcher.correspondences(log_assign, patches)
        pair = patches.batch[corr.patch]
        out: dict[str, list[Tensor]] = {
            "transform": [],
            "src": [],
            "ref": [],
            "scores": [],
            "inliers": [],
        }
        for i in range(b):
            sel = pair == i
            src, ref, w = corr.src_points[sel], corr.ref_points[sel], corr.scores[sel]
            t, inliers = self.estimator(src, ref, w, corr.patch[sel])
            for key, value in zip(out, (t, src, ref, w, inliers), strict=True):
                out[key].append(value)
        return {**out, "transform": torch.stack(out["transform"])}


def upgrade_state_dict(state: dict[str, Tensor], prefix: str = "") -> dict[str, Tensor]:
    """``state`` with the names of checkpoints written before the matcher was its own part:
    the optimal transport's parameter moved from ``optimal_transport.*`` to
    ``matcher.optimal_transport.*``. Renames in place and returns ``state``."""
    for key in [k for k in state if k.startswith(prefix + "optimal_transport.")]:
        state[prefix + "matcher." + key[len(prefix) :]] = state.pop(key)
    return state


def _rename_legacy_keys(module, state_dict, prefix, *_args) -> None:
    upgrade_state_dict(state_dict, prefix)


def build_geotransformer(config: GeoTransformerConfig | None = None) -> GeoTransformer:
    """The network's parts from a configuration (defaults: GeoTransformer's 3DMatch setting).

    Raises:
        ValueError: an ``input_features`` name / ``input_dim`` that do not agree.
    """
    cfg = config or GeoTransformerConfig()
    need = INPUT_FEATURE_DIMS.get(cfg.input_features)
    if need is None or cfg.input_dim != need:
        raise ValueError(
            f"input_features={cfg.input_features!r} needs input_dim "
            f"{need if need is not None else '?'} (one of {sorted(INPUT_FEATURE_DIMS)}), "
            f"got input_dim={cfg.input_dim}"
        )
    backbone = KPConvFPN(
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
    transformer = GeometricTransformer(
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
    matcher = Matcher(
        cfg.num_correspondences,
        cfg.dual_normalization,
        cfg.sinkhorn_iterations,
        cfg.topk,
        cfg.confidence_threshold,
        cfg.mutual,
    )
    estimator = LocalToGlobalEstimator(
        cfg.acceptance_radius, cfg.min_correspondences, cfg.refinement_steps
    )
    return GeoTransformer(cfg, backbone, transformer, matcher, estimator)
