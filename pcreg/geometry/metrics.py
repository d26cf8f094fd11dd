"""Registration metrics, as used by the 3DMatch / 3DLoMatch / KITTI protocols (DESIGN §7).

All inputs are torch tensors (or array-likes, converted with ``torch.as_tensor``); transforms
are ``(..., 4, 4)`` ``T_ref_src`` matrices. Angles are in degrees, distances in metres. Every
metric computes and returns float64 (on the input's device).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from pcreg.geometry.transforms import apply_transform, invert_transform

__all__ = [
    "covariance_rmse",
    "feature_matching_recall",
    "inlier_ratio",
    "pose_errors",
    "registration_recall",
    "relative_rotation_error_deg",
    "relative_translation_error",
    "rotation_to_quaternion",
    "transform_rmse",
]


def _t(x: Tensor | Sequence) -> Tensor:
    # Always float64: arccos near 1 in float32 cannot resolve angles below ~0.02 deg.
    return torch.as_tensor(x).to(torch.float64)


def relative_rotation_error_deg(est_transform: Tensor, gt_transform: Tensor) -> Tensor:
    """RRE: the angle of ``R_est^T R_gt`` in degrees, ``(..., 4, 4)`` -> ``(...)``.

    Equals the usual ``arccos((trace - 1) / 2)`` (with its argument clipped to [-1, 1]) for
    true rotations, but is computed as ``atan2(|vee(R - R^T)| / 2, (trace - 1) / 2)``: arccos
    near 1 turns a 1e-7 deviation from orthonormality (float32 rounding) into 0.03 deg of fake
    error, while atan2 is well conditioned at every angle. Slightly non-orthonormal ground
    truth (3DMatch, det 0.9993-1.0006) never yields NaN.
    """
    est = _t(est_transform)
    gt = _t(gt_transform)
    rel = est[..., :3, :3].transpose(-1, -2) @ gt[..., :3, :3]
    cos = (rel.diagonal(dim1=-2, dim2=-1).sum(-1) - 1.0) / 2.0
    skew = rel - rel.transpose(-1, -2)
    sin = (
        torch.stack([skew[..., 2, 1], skew[..., 0, 2], skew[..., 1, 0]], dim=-1).norm(dim=-1) / 2.0
    )
    return torch.rad2deg(torch.atan2(sin, cos))


def relative_translation_error(est_transform: Tensor, gt_transform: Tensor) -> Tensor:
    """RTE = |t_est - t_gt| in metres, ``(..., 4, 4)`` -> ``(...)``."""
    est = _t(est_transform)
    gt = _t(gt_transform)
    return (est[..., :3, 3] - gt[..., :3, 3]).norm(dim=-1)


def transform_rmse(points: Tensor, est_transform: Tensor, gt_transform: Tensor) -> Tensor:
    """RMSE (metres) between ``points (..., N, 3)`` moved by the estimate and by the truth.

    This is the registration-recall quantity of 3DMatch-style evaluations that use point
    coordinates rather than the gt.info covariance (accept when <= 0.2 m).
    """
    pts = _t(points)
    est = _t(est_transform)
    gt = _t(gt_transform)
    diff = apply_transform(pts, est) - apply_transform(pts, gt)
    return diff.square().sum(-1).mean(-1).sqrt()


def pose_errors(
    est_transform: Tensor | Sequence, gt_transform: Tensor | Sequence, points=None
) -> dict[str, float]:
    """One estimate against one truth, both ``(4, 4)`` ``T_ref_src`` (tensors or arrays):
    ``{"rre_deg", "rte_m"}``, and with ``points (N, 3)`` (the source, metres) its
    :func:`transform_rmse` as ``"rmse_m"``."""
    out = {
        "rre_deg": float(relative_rotation_error_deg(est_transform, gt_transform)),
        "rte_m": float(relative_translation_error(est_transform, gt_transform)),
    }
    if points is not None:
        out["rmse_m"] = float(transform_rmse(points, est_transform, gt_transform))
    return out


def inlier_ratio(
    src_corr_points: Tensor, ref_corr_points: Tensor, gt_transform: Tensor, radius: float = 0.1
) -> Tensor:
    """Fraction of correspondences with ``|T_gt src_i - ref_i| < radius`` (metres).

    Args:
        src_corr_points, ref_corr_points: ``(..., K, 3)`` matched points.
        gt_transform: ``(..., 4, 4)``.
        radius: inlier threshold, 0.1 m for 3DMatch (DESIGN §7).

    Returns:
        ``(...)`` in [0, 1]; 0 when K == 0.
    """
    src = _t(src_corr_points)
    ref = _t(ref_corr_points)
    gt = _t(gt_transform)
    if src.shape[-2] == 0:
        return src.new_zeros(src.shape[:-2])
    dist = (apply_transform(src, gt) - ref).norm(dim=-1)
    return (dist < radius).double().mean(-1)


def feature_matching_recall(inlier_ratios: Tensor, threshold: float = 0.05) -> Tensor:
    """FMR: fraction of pairs whose inlier ratio is >= ``threshold`` (5 % for 3DMatch)."""
    ir = _t(inlier_ratios)
    return (ir >= threshold).double().mean()


def rotation_to_quaternion(rotation: Tensor) -> Tensor:
    """Unit quaternion ``(w, x, y, z)`` with ``w >= 0`` for ``rotation (..., 3, 3)``.

    Uses Bar-Itzhack's method (the dominant eigenvector of a symmetric 4x4 matrix), which
    returns the quaternion of the nearest rotation when the input is not exactly orthonormal;
    this is the method of nibabel's ``mat2quat`` that the official 3DMatch evaluation calls.
    """
    r = _t(rotation)
    qxx, qyx, qzx = r[..., 0, 0], r[..., 1, 0], r[..., 2, 0]
    qxy, qyy, qzy = r[..., 0, 1], r[..., 1, 1], r[..., 2, 1]
    qxz, qyz, qzz = r[..., 0, 2], r[..., 1, 2], r[..., 2, 2]
    k = (
        torch.stack(
            [
                qxx - qyy - qzz,
                qyx + qxy,
                qzx + qxz,
                qzy - qyz,
                qyx + qxy,
                qyy - qxx - qzz,
                qzy + qyz,
                qxz - qzx,
                qzx + qxz,
                qzy + qyz,
                qzz - qxx - qyy,
                qyx - qxy,
                qzy - qyz,
                qxz - qzx,
                qyx - qxy,
                qxx + qyy + qzz,
            ],
            dim=-1,
        ).reshape(*r.shape[:-2], 4, 4)
        / 3.0
    )
    _, vecs = torch.linalg.eigh(k)
    q = vecs[..., :, -1]  # eigenvector of the largest eigenvalue, as (x, y, z, w)
    q = torch.cat([q[..., 3:], q[..., :3]], dim=-1)  # -> (w, x, y, z)
    return torch.where(q[..., :1] < 0, -q, q)


def covariance_rmse(est_transform: Tensor, gt_transform: Tensor, information: Tensor) -> Tensor:
    """RMSE proxy of the official 3DMatch benchmark, from the gt.info information matrix.

    With ``dT = inv(T_gt) @ T_est`` and ``x = [t(dT), q_xyz(dT)]`` (quaternion with w >= 0),
    the mean squared error over the fragment is ``x^T C x / C[0, 0]`` (Choi et al., "Robust
    reconstruction of indoor scenes", CVPR 2015). A pair counts as registered when the
    returned RMSE is <= 0.2 m.

    This reproduces the published protocol exactly, including a quirk worth knowing: gt.info
    is the information of small motions ``[t, omega]`` over the source-frame overlap, while
    ``q_xyz ~ omega / 2``, so rotation errors count at half weight (checked on the real
    redkitchen 0<-6 pair in the tests: a pure translation gives the overlap RMSE, a pure
    rotation about half of it).

    Args:
        est_transform, gt_transform: ``(..., 4, 4)``.
        information: ``(..., 6, 6)`` gt.info matrix of the pair.

    Returns:
        ``(...)`` RMSE in metres (float64).
    """
    est = _t(est_transform)
    gt = _t(gt_transform)
    info = _t(information)
    delta = invert_transform(gt) @ est
    q = rotation_to_quaternion(delta[..., :3, :3])
    x = torch.cat([delta[..., :3, 3], q[..., 1:]], dim=-1).unsqueeze(-1)  # (..., 6, 1)
    mse = (x.transpose(-1, -2) @ info @ x).squeeze(-1).squeeze(-1) / info[..., 0, 0]
    return mse.clamp(min=0).sqrt()


def registration_recall(
    success: Tensor | Sequence[bool], groups: Sequence[str] | None = None
) -> float:
    """Registration recall: mean of ``success``; with ``groups`` (e.g. scene names), the mean
    of per-group recalls (the 3DMatch convention, DESIGN §7)."""
    ok = _t(success).flatten()
    if ok.numel() == 0:
        raise ValueError("registration_recall needs at least one pair")
    if groups is None:
        return float(ok.mean())
    if len(groups) != ok.numel():
        raise ValueError(f"groups has {len(groups)} entries for {ok.numel()} pairs")
    names = sorted(set(groups))
    per_group = [float(ok[[g == n for g in groups]].mean()) for n in names]
    return sum(per_group) / len(per_group)
