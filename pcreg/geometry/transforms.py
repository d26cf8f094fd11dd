"""Rigid transforms as 4x4 matrices in the column-vector convention ``y = R @ x + t``.

A transform named ``T_ref_src`` maps source points into the reference frame (DESIGN §2).
All functions take torch tensors, broadcast over leading batch dimensions, and keep the
input's device and dtype.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "apply_transform",
    "compose_transforms",
    "invert_transform",
    "make_transform",
    "orthonormalize_rotation",
    "random_rotation",
    "random_transform",
    "rotation_from_axis_angle",
]


def make_transform(rotation: Tensor, translation: Tensor) -> Tensor:
    """Assemble ``(..., 4, 4)`` transforms.

    Args:
        rotation: ``(..., 3, 3)``.
        translation: ``(..., 3)`` metres.
    """
    # numpy's rule, not torch.broadcast_shapes: that one imports torch's symbolic-shapes
    # machinery on its first call, 0.47 s of every process's first registration (2-core Xeon)
    batch = np.broadcast_shapes(tuple(rotation.shape[:-2]), tuple(translation.shape[:-1]))
    out = rotation.new_zeros(*batch, 4, 4)
    out[..., :3, :3] = rotation
    out[..., :3, 3] = translation
    out[..., 3, 3] = 1.0
    return out


def apply_transform(points: Tensor, transform: Tensor) -> Tensor:
    """Move points: ``points (..., N, 3)``, ``transform (..., 4, 4)`` -> ``(..., N, 3)``.

    Computes ``R @ p + t`` for every row ``p`` (as ``points @ R^T + t``).
    """
    rotation = transform[..., :3, :3]
    translation = transform[..., :3, 3]
    return points @ rotation.transpose(-1, -2) + translation.unsqueeze(-2)


def invert_transform(transform: Tensor) -> Tensor:
    """Inverse of rigid transforms ``(..., 4, 4)``: ``[R^T, -R^T t]`` (exact for rotations)."""
    rot_t = transform[..., :3, :3].transpose(-1, -2)
    trans = -(rot_t @ transform[..., :3, 3:4]).squeeze(-1)
    return make_transform(rot_t, trans)


def compose_transforms(*transforms: Tensor) -> Tensor:
    """``compose_transforms(A, B, C) = A @ B @ C``: apply C first, then B, then A."""
    if not transforms:
        raise ValueError("compose_transforms needs at least one transform")
    out = transforms[0]
    for t in transforms[1:]:
        out = out @ t
    return out


def orthonormalize_rotation(rotation: Tensor) -> Tensor:
    """Nearest rotation matrix (Frobenius) to ``rotation (..., 3, 3)`` via SVD, det = +1.

    Use it on ground truth that is slightly non-orthonormal (3DMatch gt.log: det in
    [0.9993, 1.0006]) before composing many of them.
    """
    u, _, vh = torch.linalg.svd(rotation)
    det = torch.det(u @ vh)
    fix = torch.ones_like(rotation[..., 0])
    fix[..., -1] = torch.sign(det)
    return u @ torch.diag_embed(fix) @ vh


def rotation_from_axis_angle(axis: Tensor, angle: Tensor) -> Tensor:
    """Rodrigues' formula. ``axis (..., 3)`` (normalised here), ``angle (...)`` in radians."""
    axis = axis / axis.norm(dim=-1, keepdim=True)
    x, y, z = axis.unbind(-1)
    zero = torch.zeros_like(x)
    skew = torch.stack([zero, -z, y, z, zero, -x, -y, x, zero], dim=-1).reshape(*x.shape, 3, 3)
    eye = torch.eye(3, dtype=axis.dtype, device=axis.device).expand_as(skew)
    s = torch.sin(angle)[..., None, None]
    c = torch.cos(angle)[..., None, None]
    return eye + s * skew + (1 - c) * (skew @ skew)


def random_rotation(
    generator: torch.Generator | None = None,
    batch_shape: tuple[int, ...] = (),
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """Rotations drawn uniformly from SO(3) (Haar measure), ``(*batch_shape, 3, 3)``.

    Uses a normalised 4-D Gaussian as a unit quaternion, which is uniform on SO(3)
    (Shoemake, "Uniform random rotations", Graphics Gems III, 1992).
    """
    gen_device = generator.device if generator is not None else device
    q = torch.randn(*batch_shape, 4, generator=generator, dtype=torch.float64, device=gen_device)
    q = q / q.norm(dim=-1, keepdim=True)
    w, x, y, z = q.unbind(-1)
    rot = torch.stack(
        [
            1 - 2 * (y * y + z * z),
            2 * (x * y - w * z),
            2 * (x * z + w * y),
            2 * (x * y + w * z),
            1 - 2 * (x * x + z * z),
            2 * (y * z - w * x),
            2 * (x * z - w * y),
            2 * (y * z + w * x),
            1 - 2 * (x * x + y * y),
        ],
        dim=-1,
    ).reshape(*batch_shape, 3, 3)
    return rot.to(dtype=dtype, device=device if device is not None else rot.device)


def random_transform(
    generator: torch.Generator | None = None,
    batch_shape: tuple[int, ...] = (),
    *,
    max_translation: float = 1.0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """Uniform random rotation plus a translation uniform in the ball of radius
    ``max_translation`` metres. Returns ``(*batch_shape, 4, 4)``."""
    rot = random_rotation(generator, batch_shape, dtype=torch.float64, device=device)
    gen_device = generator.device if generator is not None else device
    direction = torch.randn(
        *batch_shape, 3, generator=generator, dtype=torch.float64, device=gen_device
    )
    direction = direction / direction.norm(dim=-1, keepdim=True)
    radius = torch.rand(
        *batch_shape, 1, generator=generator, dtype=torch.float64, device=gen_device
    ) ** (1.0 / 3.0)
    trans = direction * radius * max_translation
    return make_transform(rot, trans.to(rot.device)).to(dtype=dtype)
