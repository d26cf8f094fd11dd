"""Box conversions, IoU and generalized IoU (Rezatofighi et al., CVPR 2019), as DETR uses them.

Boxes are ``(..., 4)`` tensors: ``cxcywh`` (centre, width, height) or ``xyxy`` (corners); any
unit, as long as both arguments share it (DETR: image-normalised [0, 1]).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["box_area", "box_cxcywh_to_xyxy", "box_iou", "box_xyxy_to_cxcywh", "generalized_box_iou"]


def box_cxcywh_to_xyxy(boxes: Tensor) -> Tensor:
    cx, cy, w, h = boxes.unbind(-1)
    return torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], dim=-1)


def box_xyxy_to_cxcywh(boxes: Tensor) -> Tensor:
    x0, y0, x1, y1 = boxes.unbind(-1)
    return torch.stack([(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0], dim=-1)


def box_area(boxes: Tensor) -> Tensor:
    """Area of ``xyxy`` boxes ``(..., 4)`` -> ``(...)`` (negative extents count as 0)."""
    return (boxes[..., 2] - boxes[..., 0]).clamp(min=0) * (boxes[..., 3] - boxes[..., 1]).clamp(
        min=0
    )


def box_iou(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """Pairwise IoU of ``xyxy`` boxes ``a (N, 4)`` and ``b (M, 4)`` -> ``(iou (N, M), union)``."""
    area_a, area_b = box_area(a), box_area(b)
    lt = torch.maximum(a[:, None, :2], b[None, :, :2])
    rb = torch.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    union = area_a[:, None] + area_b[None, :] - inter
    return inter / union.clamp(min=1e-12), union


def generalized_box_iou(a: Tensor, b: Tensor) -> Tensor:
    """Pairwise GIoU = IoU - |C \\ (A ∪ B)| / |C| with C the smallest enclosing box, in
    [-1, 1]; ``a (N, 4)``, ``b (M, 4)`` ``xyxy`` -> ``(N, M)``.

    Raises:
        ValueError: a box with x1 < x0 or y1 < y0 (degenerate boxes would make it meaningless).
    """
    if (a[:, 2:] < a[:, :2]).any() or (b[:, 2:] < b[:, :2]).any():
        raise ValueError("generalized_box_iou needs xyxy boxes with x1 >= x0 and y1 >= y0")
    iou, union = box_iou(a, b)
    lt = torch.minimum(a[:, None, :2], b[None, :, :2])
    rb = torch.maximum(a[:, None, 2:], b[None, :, 2:])
    enclosing = (rb - lt).clamp(min=0).prod(-1)
    return iou - (enclosing - union) / enclosing.clamp(min=1e-12)
