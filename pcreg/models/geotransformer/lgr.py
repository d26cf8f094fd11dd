"""Local-to-global registration (GeoTransformer §3.5): no RANSAC.

Every matched patch pair with enough correspondences gives one weighted-Procrustes hypothesis;
the hypothesis with the most (score-weighted) inliers among all dense correspondences wins and
is refined by re-solving on its inliers for a few iterations.
"""

from __future__ import annotations

import torch
from torch import Tensor

from pcreg.geometry.procrustes import weighted_procrustes
from pcreg.geometry.transforms import apply_transform

__all__ = ["LocalToGlobalEstimator", "inlier_counts", "local_to_global_registration"]


def local_to_global_registration(
    src_points: Tensor,
    ref_points: Tensor,
    scores: Tensor,
    patch_index: Tensor,
    acceptance_radius: float,
    min_correspondences: int = 3,
    num_refinement_steps: int = 5,
) -> tuple[Tensor, Tensor]:
    """Estimate ``T_ref_src`` of one pair.

    Args:
        src_points ``(C, 3)``, ref_points ``(C, 3)``: dense correspondences (row i matches row i).
        scores ``(C,)``: their confidences (non-negative weights).
        patch_index ``(C,)`` int64: the patch pair each correspondence came from.
        acceptance_radius: inlier distance in metres (0.1 indoor, 0.6 outdoor).
        min_correspondences: a patch proposes a hypothesis when it has at least this many.
        num_refinement_steps: weighted-Procrustes re-solves on the inliers.
    Returns:
        ``transform (4, 4)`` and the final inlier mask ``(C,)``. With no correspondences the
        identity and an empty mask.
    """
    c = ref_points.shape[0]
    eye = torch.eye(4, dtype=ref_points.dtype, device=ref_points.device)
    if c == 0:
        return eye, torch.zeros(0, dtype=torch.bool, device=ref_points.device)
    patches, inverse, counts = torch.unique(patch_index, return_inverse=True, return_counts=True)
    proposing = counts >= min_correspondences
    if not bool(proposing.any()):
        proposing = counts == counts.max()
    # group correspondences per proposing patch into a padded (H, L, 3) batch
    order = torch.argsort(inverse, stable=True)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(c, device=order.device) - starts[inverse[order]]
    length = int(counts.max())
    h = patches.shape[0]
    ref_b = ref_points.new_zeros(h, length, 3)
    src_b = src_points.new_zeros(h, length, 3)
    w_b = scores.new_zeros(h, length)
    ref_b[inverse[order], rank] = ref_points[order]
    src_b[inverse[order], rank] = src_points[order]
    w_b[inverse[order], rank] = scores[order]
    hypotheses = weighted_procrustes(src_b[proposing], ref_b[proposing], w_b[proposing])  # (H',4,4)
    inlier_votes = inlier_counts(src_points, ref_points, hypotheses, acceptance_radius)
    transform = hypotheses[inlier_votes.argmax()]
    for _ in range(num_refinement_steps):
        residual = _residual(src_points, ref_points, transform)
        inliers = residual < acceptance_radius
        if int(inliers.sum()) < 3:
            break
        transform = weighted_procrustes(src_points, ref_points, scores * inliers)
    residual = _residual(src_points, ref_points, transform)
    return transform, residual < acceptance_radius


def inlier_counts(src: Tensor, ref: Tensor, transforms: Tensor, radius: float) -> Tensor:
    """``(H,)`` int64: for each of ``transforms (H, 4, 4)``, how many of the correspondences
    ``src (C, 3)`` -> ``ref (C, 3)`` it moves within ``radius`` metres (strictly less).

    Equal to counting ``|R s_i + t - r_i| < radius`` for every pair, without forming the
    ``(H, C, 3)`` moved points: the squared residual is a bilinear form in per-transform
    coefficients and per-correspondence features,

        |R s + t - r|^2 = s^T (R^T R) s + |t|^2 + |r|^2 + 2 (R^T t).s - 2 t.r - 2 r^T R s,

    so one ``(H, 26) @ (26, C)`` product gives all of them. It runs in float64 on points
    centred at their means (no cancellation to speak of: the result equals the direct float64
    evaluation, tested), and keeps ``R^T R`` rather than assuming it is the identity, so it is
    exact for whatever matrices the solver returned.
    """
    s = src.double()
    r = ref.double()
    t_all = transforms.double()
    mu_s, mu_r = s.mean(0), r.mean(0)
    s, r = s - mu_s, r - mu_r
    rot = t_all[:, :3, :3]
    # the translation acting on the centred points: R (s + mu_s) + t - (r + mu_r)
    t = t_all[:, :3, 3] + rot @ mu_s - mu_r
    c, h = s.shape[0], rot.shape[0]
    feats = torch.cat(
        [
            (r[:, :, None] * s[:, None, :]).reshape(c, 9),
            (s[:, :, None] * s[:, None, :]).reshape(c, 9),
            s,
            r,
            (r * r).sum(1, keepdim=True),
            s.new_ones(c, 1),
        ],
        1,
    )
    coef = torch.cat(
        [
            -2.0 * rot.reshape(h, 9),
            (rot.transpose(1, 2) @ rot).reshape(h, 9),
            2.0 * (rot.transpose(1, 2) @ t[:, :, None])[:, :, 0],
            -2.0 * t,
            t.new_ones(h, 1),
            (t * t).sum(1, keepdim=True),
        ],
        1,
    )
    return ((coef @ feats.T) < radius**2).sum(1)


def _residual(src: Tensor, ref: Tensor, transform: Tensor) -> Tensor:
    return torch.linalg.vector_norm(apply_transform(src, transform) - ref, dim=-1)


class LocalToGlobalEstimator:
    """The estimation part of the network: :func:`local_to_global_registration` with its
    settings (GeoTransformer §3.5). Parameter-free; called once per pair.

    Args:
        acceptance_radius: inlier distance in metres (0.1 indoor, 0.6 outdoor in the
            published configurations).
        min_correspondences: correspondences a patch needs to propose a hypothesis.
        refinement_steps: weighted-Procrustes re-solves on the inliers.
    """

    def __init__(
        self, acceptance_radius: float, min_correspondences: int = 3, refinement_steps: int = 5
    ) -> None:
        self.acceptance_radius = acceptance_radius
        self.min_correspondences = min_correspondences
        self.refinement_steps = refinement_steps

    def __call__(
        self, src_points: Tensor, ref_points: Tensor, scores: Tensor, patch_index: Tensor
    ) -> tuple[Tensor, Tensor]:
        """``T_ref_src (4, 4)`` and the inlier mask ``(C,)`` of one pair's correspondences."""
        return local_to_global_registration(
            src_points,
            ref_points,
            scores,
            patch_index,
            self.acceptance_radius,
            self.min_correspondences,
            self.refinement_steps,
        )
