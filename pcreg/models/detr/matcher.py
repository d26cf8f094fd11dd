"""Hungarian matching of predictions to ground-truth boxes (DETR §3.1, Kuhn 1955 via
``scipy.optimize.linear_sum_assignment``).

Cost of pairing query i with target j: ``-w_class p_i(c_j) + w_bbox |b_i - b_j|_1
- w_giou GIoU(b_i, b_j)`` (DETR's weights 1, 5, 2). The costs of the whole batch are computed in
one matrix ``(B*Q, sum_j)`` and then solved per image.
"""

from __future__ import annotations

import torch
from scipy.optimize import linear_sum_assignment
from torch import Tensor, nn

from pcreg.models.detr.box_ops import box_cxcywh_to_xyxy, generalized_box_iou

__all__ = ["HungarianMatcher"]


class HungarianMatcher(nn.Module):
    def __init__(self, cost_class: float = 1.0, cost_bbox: float = 5.0, cost_giou: float = 2.0):
        super().__init__()
        if cost_class == cost_bbox == cost_giou == 0:
            raise ValueError("all matching costs are zero")
        self.cost_class, self.cost_bbox, self.cost_giou = cost_class, cost_bbox, cost_giou

    @torch.no_grad()
    def forward(self, outputs: dict, targets: list[dict]) -> list[tuple[Tensor, Tensor]]:
        """outputs: ``pred_logits (B, Q, K+1)``, ``pred_boxes (B, Q, 4)``; targets: per image
        ``labels (N_b,)`` int64 and ``boxes (N_b, 4)`` cxcywh. Returns per image
        ``(query indices, target indices)`` int64 of length ``min(Q, N_b)``."""
        b, q = outputs["pred_logits"].shape[:2]
        prob = outputs["pred_logits"].flatten(0, 1).softmax(-1)  # (BQ, K+1)
        boxes = outputs["pred_boxes"].flatten(0, 1)  # (BQ, 4)
        labels = torch.cat([t["labels"] for t in targets])
        tboxes = torch.cat([t["boxes"] for t in targets])
        empty = torch.empty(0, dtype=torch.int64)
        if len(labels) == 0:
            return [(empty, empty) for _ in targets]
        cost = (
            -self.cost_class * prob[:, labels]
            + self.cost_bbox * torch.cdist(boxes, tboxes.to(boxes.dtype), p=1)
            - self.cost_giou
            * generalized_box_iou(
                box_cxcywh_to_xyxy(boxes), box_cxcywh_to_xyxy(tboxes.to(boxes.dtype))
            )
        )
        cost = cost.view(b, q, -1).cpu()
        out, start = [], 0
        for i, t in enumerate(targets):
            n = len(t["labels"])
            rows, cols = linear_sum_assignment(cost[i, :, start : start + n].numpy())
            out.append(
                (torch.as_tensor(rows, dtype=torch.int64), torch.as_tensor(cols, dtype=torch.int64))
            )
            start += n
        return out
