"""DETR's set loss: Hungarian matching, then cross-entropy over all queries (the "no object"
class down-weighted by ``eos_coef`` = 0.1), and L1 + GIoU on the matched boxes, each divided by
the number of target boxes in the batch; the same on every auxiliary decoder output."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pcreg.models.detr.box_ops import box_cxcywh_to_xyxy, generalized_box_iou
from pcreg.models.detr.matcher import HungarianMatcher

__all__ = ["SetCriterion"]


class SetCriterion(nn.Module):
    def __init__(
        self,
        num_classes: int,
        matcher: HungarianMatcher,
        eos_coef: float = 0.1,
        weight_ce: float = 1.0,
        weight_bbox: float = 5.0,
        weight_giou: float = 2.0,
    ) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.matcher = matcher
        self.weights = {"loss_ce": weight_ce, "loss_bbox": weight_bbox, "loss_giou": weight_giou}
        class_weight = torch.ones(num_classes + 1)
        class_weight[-1] = eos_coef
        self.register_buffer("class_weight", class_weight)

    def _single(self, out: dict, targets: list[dict], num_boxes: float) -> dict[str, Tensor]:
        indices = self.matcher(out, targets)
        logits = out["pred_logits"]
        b, q = logits.shape[:2]
        target_classes = torch.full(
            (b, q), self.num_classes, dtype=torch.int64, device=logits.device
        )
        batch_idx = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)])
        query_idx = torch.cat([src for src, _ in indices])
        matched_labels = torch.cat(
            [t["labels"][j] for t, (_, j) in zip(targets, indices, strict=True)]
        )
        target_classes[batch_idx, query_idx] = matched_labels.to(logits.device)
        loss_ce = F.cross_entropy(
            logits.transpose(1, 2), target_classes, weight=self.class_weight.to(logits.dtype)
        )
        pred = out["pred_boxes"][batch_idx, query_idx]
        tgt = torch.cat([t["boxes"][j] for t, (_, j) in zip(targets, indices, strict=True)]).to(
            pred
        )
        loss_bbox = F.l1_loss(pred, tgt, reduction="sum") / num_boxes
        giou = torch.diag(generalized_box_iou(box_cxcywh_to_xyxy(pred), box_cxcywh_to_xyxy(tgt)))
        loss_giou = (1 - giou).sum() / num_boxes
        return {"loss_ce": loss_ce, "loss_bbox": loss_bbox, "loss_giou": loss_giou}

    def forward(self, outputs: dict, targets: list[dict]) -> dict[str, Tensor]:
        """Returns the weighted total ``loss`` and each term (final layer unsuffixed, auxiliary
        layer k suffixed ``_k``)."""
        num_boxes = max(1.0, float(sum(len(t["labels"]) for t in targets)))
        losses = self._single(outputs, targets, num_boxes)
        for k, aux in enumerate(outputs.get("aux_outputs", [])):
            losses.update({f"{n}_{k}": v for n, v in self._single(aux, targets, num_boxes).items()})
        losses["loss"] = sum(self.weights[n.rsplit("_", 1)[0] if n[-1].isdigit() else n] * v
                             for n, v in losses.items())  # fmt: skip
        return losses
