"""Local reference frames that make KPConv rotation invariant.

A KPConv compares neighbor offsets ``p_j - q`` with kernel points fixed in the input frame, so
its features change when the cloud is rotated; networks learn around this with rotation
augmentation, which on a CPU budget is far too slow to converge (the weights issue: no learning
in 500 full-rotation steps). Expressing the offsets in a frame that rotates with the cloud
removes the dependence by construction (the idea of rotation-invariant point convolutions, e.g.
Zhang et al., "RIConv", 3DV 2019; Kim et al., "RI-Framework", 2020). The frame is SHOT's
(Tombari et al., ECCV 2010): eigenvectors of the distance-weighted covariance of the
neighborhood about the query point, weights ``max(R - |p_j - q|, 0)``; x = largest, z = smallest
eigenvector, each signed so that the weighted mean offset projects positively on it, y = z × x.

Where a neighborhood is symmetric (a flat patch, a straight edge) the signs or the in-plane
axes are ambiguous, but there any choice sees the same neighborhood, so the features barely
change; near-symmetric neighborhoods are the residual source of non-invariance.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["local_reference_frames"]


@torch.no_grad()
def local_reference_frames(
    q_points: Tensor, s_points: Tensor, neighbor_indices: Tensor, radius: float
) -> Tensor:
    """Frames ``(M, 3, 3)`` whose columns are the x, y, z axes at each query.

    Args:
        q_points: ``(M, 3)`` queries; s_points: ``(N, 3)`` support points.
        neighbor_indices: ``(M, H)`` int64 into ``s_points``, ``N`` = padding (shadow).
        radius: neighborhood radius in metres (the KPConv's).

    Returns:
        Rotation matrices (det +1); a query without neighbors gets the identity.
    """
    if q_points.device.type == "cpu":
        # one implementation with the ONNX Runtime path (pcreg.runtime.frames): where a
        # neighborhood is near-symmetric the eigenvectors' signs and in-plane axes depend on
        # the LAPACK build, and torch's and numpy's differed on 0.2 % of a KITTI scan's
        # frames (a 3.9 mm difference in the estimate of KITTI 00 94->95)
        from pcreg.runtime.frames import local_reference_frames as frames_numpy

        out = frames_numpy(
            q_points.detach().numpy(),
            s_points.detach().numpy(),
            neighbor_indices.numpy(),
            float(radius),
        )
        return torch.from_numpy(out).to(s_points.dtype)
    return _frames_torch(q_points, s_points, neighbor_indices, radius)


def _frames_torch(
    q_points: Tensor, s_points: Tensor, neighbor_indices: Tensor, radius: float
) -> Tensor:
    """:func:`local_reference_frames` on the tensors' device (a GPU's)."""
    n = s_points.shape[0]
    dtype = s_points.dtype
    valid = neighbor_indices < n
    # float64 throughout: float32 covariances of near-degenerate neighborhoods swing the axes
    padded = torch.cat([s_points, s_points.new_zeros(1, 3)], 0).double()
    rel = padded[neighbor_indices] - q_points.double()[:, None, :]  # (M, H, 3)
    w = (radius - rel.norm(dim=-1)).clamp(min=0) * valid  # (M, H)
    wsum = w.sum(1).clamp(min=1e-12)
    wrel = rel * w[..., None]
    cov = torch.einsum("mhi,mhj->mij", wrel, rel) / wsum[:, None, None]
    _, vecs = torch.linalg.eigh(cov)
    x, z = vecs[..., 2], vecs[..., 0]  # largest / smallest eigenvalue
    mean = wrel.sum(1) / wsum[:, None]  # (M, 3) weighted mean offset
    x = torch.where(((mean * x).sum(-1, keepdim=True) < 0), -x, x)
    z = torch.where(((mean * z).sum(-1, keepdim=True) < 0), -z, z)
    y = torch.linalg.cross(z, x)
    frames = torch.stack([x, y, z], dim=-1)  # columns
    empty = w.sum(1) <= 0
    if empty.any():
        frames[empty] = torch.eye(3, dtype=frames.dtype, device=frames.device)
    return frames.to(dtype)
