"""DETR parts against their definitions: box ops golden values, the matcher (batched equals
per image, optimal, empty targets), the criterion (decreases toward the targets), the model
(shapes, padding does not change an image's predictions)."""

from __future__ import annotations

import itertools

import pytest
import torch

from pcreg.models.detr import DetrConfig, HungarianMatcher, SetCriterion, build_detr
from pcreg.models.detr.box_ops import (
    box_cxcywh_to_xyxy,
    box_iou,
    box_xyxy_to_cxcywh,
    generalized_box_iou,
)


def test_box_conversions_round_trip(gen):
    b = torch.rand(20, 4, generator=gen, dtype=torch.float64)
    assert torch.allclose(box_xyxy_to_cxcywh(box_cxcywh_to_xyxy(b)), b, atol=1e-12)
    assert box_cxcywh_to_xyxy(torch.tensor([0.5, 0.5, 0.2, 0.4])).tolist() == pytest.approx(
        [0.4, 0.3, 0.6, 0.7]
    )


def test_giou_golden_values():
    a = torch.tensor([[0.0, 0.0, 2.0, 2.0]])
    # identical boxes: IoU = GIoU = 1
    assert generalized_box_iou(a, a).item() == pytest.approx(1.0)
    # disjoint: [0,2]^2 and [3,5]x[0,2]: IoU 0, hull 5x2 = 10, union 8 -> GIoU = -(10-8)/10
    b = torch.tensor([[3.0, 0.0, 5.0, 2.0]])
    assert box_iou(a, b)[0].item() == 0.0
    assert generalized_box_iou(a, b).item() == pytest.approx(-0.2)
    # far apart: GIoU tends to -1
    far = torch.tensor([[100.0, 100.0, 101.0, 101.0]])
    assert generalized_box_iou(a, far).item() < -0.99
    # half overlap: [0,2]^2 vs [1,3]x[0,2]: inter 2, union 6, hull 6 -> IoU = GIoU = 1/3
    c = torch.tensor([[1.0, 0.0, 3.0, 2.0]])
    assert generalized_box_iou(a, c).item() == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="x1 >= x0"):
        generalized_box_iou(torch.tensor([[2.0, 0.0, 1.0, 1.0]]), a)


def _outputs(gen, b=3, q=6, k=3):
    return {
        "pred_logits": torch.randn(b, q, k + 1, generator=gen),
        "pred_boxes": torch.rand(b, q, 4, generator=gen) * 0.5 + 0.25,
    }


def _targets(gen, sizes, k=3):
    return [
        {"labels": torch.randint(0, k, (n,), generator=gen),
         "boxes": torch.rand(n, 4, generator=gen) * 0.5 + 0.25}
        for n in sizes
    ]  # fmt: skip


def test_matcher_batched_equals_per_image_and_is_optimal(gen):
    matcher = HungarianMatcher()
    out = _outputs(gen)
    targets = _targets(gen, [2, 0, 4])
    batched = matcher(out, targets)
    for i, t in enumerate(targets):
        single = matcher({k: v[i : i + 1] for k, v in out.items()}, [t])[0]
        assert torch.equal(batched[i][0], single[0]) and torch.equal(batched[i][1], single[1])
    assert len(batched[1][0]) == 0  # an image without objects
    # brute force: no other assignment of image 2 costs less
    t = targets[2]
    prob = out["pred_logits"][2].softmax(-1)
    cost = (
        -prob[:, t["labels"]]
        + 5 * torch.cdist(out["pred_boxes"][2], t["boxes"], p=1)
        - 2
        * generalized_box_iou(
            box_cxcywh_to_xyxy(out["pred_boxes"][2]), box_cxcywh_to_xyxy(t["boxes"])
        )
    )
    rows, cols = batched[2]
    best = cost[rows, cols].sum()
    for perm in itertools.permutations(range(6), 4):
        assert cost[list(perm), list(range(4))].sum() >= best - 1e-6


def test_matcher_with_no_targets_at_all(gen):
    out = _outputs(gen, b=2)
    res = HungarianMatcher()(out, _targets(gen, [0, 0]))
    assert all(len(r) == 0 and len(c) == 0 for r, c in res)
    crit = SetCriterion(3, HungarianMatcher())
    losses = crit({**out, "aux_outputs": []}, _targets(gen, [0, 0]))
    assert torch.isfinite(losses["loss"]) and losses["loss_bbox"] == 0 and losses["loss_giou"] == 0


def test_criterion_decreases_toward_targets(gen):
    crit = SetCriterion(3, HungarianMatcher())
    targets = _targets(gen, [3, 1])
    out = _outputs(gen, b=2, q=5)
    base = crit(out, targets)
    # move the matched predictions halfway to their targets and raise their class logits
    indices = crit.matcher(out, targets)
    closer = {k: v.clone() for k, v in out.items()}
    for b, (rows, cols) in enumerate(indices):
        closer["pred_boxes"][b, rows] = (out["pred_boxes"][b, rows] + targets[b]["boxes"][cols]) / 2
        closer["pred_logits"][b, rows, targets[b]["labels"][cols]] += 3.0
    moved = crit(closer, targets)
    for name in ("loss_ce", "loss_bbox", "loss_giou", "loss"):
        assert moved[name] < base[name], name
    exact = {k: v.clone() for k, v in out.items()}
    for b, (rows, cols) in enumerate(indices):
        exact["pred_boxes"][b, rows] = targets[b]["boxes"][cols]
    res = crit(exact, targets)
    assert res["loss_bbox"] == pytest.approx(0.0, abs=1e-6)
    assert res["loss_giou"] == pytest.approx(0.0, abs=1e-6)
    # the no-object class weighs 0.1 in the cross-entropy
    assert crit.class_weight.tolist() == pytest.approx([1.0, 1.0, 1.0, 0.1])


def test_aux_losses_and_weighted_total(gen):
    crit = SetCriterion(3, HungarianMatcher())
    out = _outputs(gen)
    out["aux_outputs"] = [_outputs(gen), _outputs(gen)]
    losses = crit(out, _targets(gen, [1, 2, 3]))
    assert {"loss_ce_0", "loss_bbox_1", "loss_giou_1"} <= set(losses)
    terms = [v for k, v in losses.items() if k != "loss"]
    weights = [{"ce": 1, "bb": 5, "gi": 2}[k.split("_")[1][:2]] for k in losses if k != "loss"]
    assert losses["loss"] == pytest.approx(
        float(sum(w * t for w, t in zip(weights, terms, strict=True)))
    )


def test_model_shapes_and_padding_invariance():
    torch.manual_seed(0)
    model = build_detr(
        DetrConfig(num_queries=5, d_model=32, ffn_dim=64, backbone_widths=[8, 16, 32])
    ).eval()
    image = torch.randn(1, 3, 48, 40)
    valid = torch.ones(1, 48, 40, dtype=torch.bool)
    out = model(image, valid)
    assert out["pred_logits"].shape == (1, 5, 4) and out["pred_boxes"].shape == (1, 5, 4)
    assert len(out["aux_outputs"]) == 2
    assert ((out["pred_boxes"] > 0) & (out["pred_boxes"] < 1)).all()
    # the same image padded into a larger canvas: the backbone never reads the padding and the
    # encoder never attends to it, so the predictions do not change
    big = torch.zeros(1, 3, 64, 64)
    big[:, :, :48, :40] = image
    big_valid = torch.zeros(1, 64, 64, dtype=torch.bool)
    big_valid[:, :48, :40] = True
    padded = model(torch.cat([big, big]), torch.cat([big_valid, torch.ones_like(big_valid)]))
    # batch items do not interact
    alone = model(big, big_valid)
    assert torch.allclose(padded["pred_logits"][:1], alone["pred_logits"], atol=1e-5)
    assert (padded["pred_logits"][0] - out["pred_logits"][0]).abs().max() < 1e-5
    assert (padded["pred_boxes"][0] - out["pred_boxes"][0]).abs().max() < 1e-5
