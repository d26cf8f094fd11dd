"""`pcreg detr train|evaluate` end to end on a few generated images, and the COCO evaluator
against hand-made results."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pcreg.cli import main
from pcreg.data.vision.coco import CocoDetection
from pcreg.data.vision.shapes import write_shapes_dataset
from pcreg.engine.detection import coco_evaluate, predictions_to_coco


def test_coco_evaluate_scores_perfect_and_shifted_results(tmp_path):
    ann = write_shapes_dataset(tmp_path, "val", 10, seed=5)
    coco = json.loads(ann.read_text())
    perfect = [{"image_id": a["image_id"], "category_id": a["category_id"], "bbox": a["bbox"],
                "score": 0.9} for a in coco["annotations"]]  # fmt: skip
    assert coco_evaluate(ann, perfect)["mAP"] == pytest.approx(1.0)
    # the caller's entries are left as given (pycocotools' loadRes adds area, id, ... in place)
    assert all(set(r) == {"image_id", "category_id", "bbox", "score"} for r in perfect)
    wrong_class = [{**r, "category_id": r["category_id"] % 3 + 1} for r in perfect]
    assert coco_evaluate(ann, wrong_class)["AP50"] == pytest.approx(0.0)
    # boxes shifted by a quarter of their width: IoU 0.6 -> counted at 0.5, not at 0.75
    shifted = [{**r, "bbox": [r["bbox"][0] + r["bbox"][2] / 4, *r["bbox"][1:]]} for r in perfect]
    ap = coco_evaluate(ann, shifted)
    assert ap["AP50"] == pytest.approx(1.0) and ap["AP75"] == pytest.approx(0.0)


def test_predictions_to_coco_gives_pixel_boxes_clipped_to_each_image():
    """Normalised (cx, cy, w, h) of each image's own size -> [x, y, w, h] px, clipped; the best
    real class (not "no object") and its probability; category ids by label order."""
    logits = torch.tensor(
        [[[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 5.0]],
         [[0.0, 0.0, 3.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]]
    )  # fmt: skip
    boxes = torch.tensor(
        [[[0.5, 0.5, 0.25, 0.5], [0.1, 0.9, 0.4, 0.4], [0.95, 0.05, 0.5, 0.5]],
         [[0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 2.0, 2.0], [0.25, 0.75, 0.1, 0.1]]]
    )  # fmt: skip
    targets = [{"image_id": 11, "size": (60, 80)}, {"image_id": 4, "size": (40, 100)}]
    res = predictions_to_coco({"pred_logits": logits, "pred_boxes": boxes}, targets, [3, 7, 9])
    assert [(r["image_id"], r["category_id"]) for r in res] == [
        (11, 3), (11, 9), (11, 7), (4, 9), (4, 3), (4, 3)
    ]  # fmt: skip
    expected = [[30, 15, 20, 30], [0, 42, 24, 18], [56, 0, 24, 18],
                [25, 10, 50, 20], [0, 0, 100, 40], [20, 28, 10, 4]]  # fmt: skip
    np.testing.assert_allclose([r["bbox"] for r in res], expected, rtol=0, atol=1e-5)
    prob = logits.softmax(-1)[..., :3].max(-1).values.flatten().tolist()
    assert [r["score"] for r in res] == prob
    assert all(type(v) in (int, float) for r in res for v in (*r["bbox"], r["score"]))
    json.dumps(res, allow_nan=False)  # plain JSON types only


def test_detr_cli_trains_writes_outputs_and_evaluates(tmp_path, capsys):
    args = [
        f"data.root={tmp_path / 'data'}",
        "+data.generate={train_images: 24, val_images: 8, seed: 0}",
        "train.epochs=2", "train.batch_size=8", "train.eval_every=1", "train.eval_limit=4",
        f"out_dir={tmp_path / 'run'}", "model.d_model=32", "model.ffn_dim=64",
        "model.backbone_widths=[8,16,32]",
    ]  # fmt: skip
    assert main(["detr", "train", *args]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert {"mAP", "AP50", "train_time_s", "steps"} <= set(metrics) and metrics["steps"] == 6
    for name in ("checkpoint.pt", "metrics.json", "training_curves.png", "predictions.png"):
        assert (tmp_path / "run" / name).stat().st_size > 500
    assert main(["detr", "evaluate", *args]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["mAP"] == pytest.approx(metrics["mAP"]) and again["val_images"] == 8
    assert len(CocoDetection(tmp_path / "data/val", tmp_path / "data/annotations/val.json")) == 8
    assert main(["detr", "train", *args]) == 2  # outputs exist: refused without overwrite


@pytest.mark.slow
def test_detr_shapes_recipe_reaches_ap50_08_map_05_within_an_hour(tmp_path):
    """The shipped experiment end to end (~55 min on 2 CPU cores; opt-in with -m slow)."""
    out = tmp_path / "detr"
    args = ["detr", "train", "experiment=detr_shapes", f"out_dir={out}",
            f"data.root={tmp_path / 'shapes'}"]  # fmt: skip
    assert main(args) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["val_images"] >= 500
    assert metrics["AP50"] >= 0.8 and metrics["mAP"] >= 0.5
    assert metrics["train_time_s"] <= 3600


def test_train_detr_returns_the_first_validation_batch_and_draws_nothing(tmp_path):
    """The trainer writes data only; ``pcreg detr train`` draws the two PNGs from its result."""
    from pcreg._compose import compose
    from pcreg.config import from_dict
    from pcreg.engine.configs import DetrExperimentConfig
    from pcreg.engine.detection import train_detr

    overrides = [
        f"data.root={tmp_path / 'data'}",
        "+data.generate={train_images: 8, val_images: 6, seed: 0}",
        "train.epochs=1", "train.batch_size=4", "train.eval_every=0",
        f"out_dir={tmp_path / 'run'}", "model.d_model=32", "model.ffn_dim=64",
        "model.backbone_widths=[8,16,32]",
    ]  # fmt: skip
    cfg = from_dict(DetrExperimentConfig, compose("detr", overrides))
    run = train_detr(cfg)
    out = tmp_path / "run"
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "metrics.json"]
    assert run.metrics == json.loads((out / "metrics.json").read_text())
    assert run.metrics["history"]["epoch"] == [1] and run.metrics["steps"] == 2
    assert run.metrics["history"]["val_mAP"] == [run.metrics["mAP"]]
    s = run.sample
    assert s.names == ["rectangle", "ellipse", "triangle"]
    val = CocoDetection(tmp_path / "data/val", tmp_path / "data/annotations/val.json")
    assert [t["image_id"] for t in s.targets] == [val[i][1]["image_id"] for i in range(4)]
    assert tuple(s.outputs["pred_logits"].shape) == (4, cfg.model.num_queries, 4)
    assert tuple(s.outputs["pred_boxes"].shape) == (4, cfg.model.num_queries, 4)
    assert "aux_outputs" not in s.outputs
    assert s.images.shape[0] == 4 and s.valid.shape == (4, *s.images.shape[2:])
