"""`pcreg detr train|evaluate` end to end on a few generated images, and the COCO evaluator
against hand-made results."""

from __future__ import annotations

import json
import math

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


COCO_STATS = ["mAP", "AP50", "AP75", "AP_small", "AP_medium", "AP_large",
              "AR1", "AR10", "AR100", "AR_small", "AR_medium", "AR_large"]  # fmt: skip


def _cocoeval_file(ann_file, path) -> list[float]:
    """pycocotools on its own, from the files: the 12 stats of COCOeval (bbox)."""
    import contextlib
    import io

    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(ann_file))
        ev = COCOeval(gt, gt.loadRes(str(path)), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return [float(v) for v in ev.stats]


def _iou(a: list[float], b: list[float]) -> float:
    """IoU of two [x, y, w, h] boxes."""
    iw = max(0.0, min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1]))
    return iw * ih / (a[2] * a[3] + b[2] * b[3] - iw * ih)


def test_detr_evaluate_writes_coco_results_that_pycocotools_scores_alike(
    overfit_detr, tmp_path, capsys
):
    args, trained, ann_file, root = overfit_detr
    path = tmp_path / "detections.json"
    assert main(["detr", "evaluate", *args, f"detections={path}"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    # the in-memory numbers are not vacuous, and the same as training's last evaluation
    assert metrics["mAP"] > 0.01 and metrics["AP50"] > 0.05 and metrics["AR100"] > 0.01
    assert [metrics[n] for n in COCO_STATS] == [trained[n] for n in COCO_STATS]
    # the file, read and scored by pycocotools alone, gives exactly the same 12 numbers
    assert _cocoeval_file(ann_file, path) == [metrics[n] for n in COCO_STATS]

    dets = json.loads(path.read_text())
    coco = json.loads(ann_file.read_text())
    images = {im["id"]: im for im in coco["images"]}
    assert all(set(d) == {"image_id", "category_id", "bbox", "score"} for d in dets)
    assert {d["category_id"] for d in dets} <= {c["id"] for c in coco["categories"]}
    per_image = [d["image_id"] for d in dets]
    assert sorted(set(per_image)) == sorted(images)  # every image, no other
    assert all(per_image.count(i) == 12 for i in images)  # one detection per query
    for d in dets:
        x, y, w, h = d["bbox"]
        im = images[d["image_id"]]
        assert min(x, y) >= 0 and w > 0 and h > 0, d
        assert x + w <= im["width"] + 1e-9 and y + h <= im["height"] + 1e-9, d
        assert 0 < d["score"] <= 1
    # [x, y, w, h] in pixels of the original image: on several images some detection finds a
    # ground-truth box (IoU > 0.5 computed here, not by pycocotools; 5 of 8 when written)
    truth = {i: [a["bbox"] for a in coco["annotations"] if a["image_id"] == i] for i in images}
    best = {i: max(_iou(d["bbox"], g) for d in dets if d["image_id"] == i for g in truth[i])
            for i in images}  # fmt: skip
    assert sum(v > 0.5 for v in best.values()) >= 2 and max(best.values()) > 0.7, best
    # training wrote the same detections (the same weights, batches of the same images)
    train_dets = json.loads((root / "train_detections.json").read_text())
    assert [(d["image_id"], d["category_id"]) for d in train_dets] == [
        (d["image_id"], d["category_id"]) for d in dets
    ]
    np.testing.assert_allclose(
        [[*d["bbox"], d["score"]] for d in train_dets],
        [[*d["bbox"], d["score"]] for d in dets],
        rtol=0,
        atol=1e-5,
    )

    # an existing file is refused (exit 2, untouched) unless overwrite=true
    before = path.read_bytes()
    path.write_text("[]\n")
    assert main(["detr", "evaluate", *args, f"detections={path}"]) == 2
    assert "already exists" in capsys.readouterr().err and path.read_text() == "[]\n"
    # refused before any work: the checkpoint is not even looked for
    missing = f"checkpoint={tmp_path / 'none.pt'}"
    assert main(["detr", "evaluate", *args, f"detections={path}", missing]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["detr", "evaluate", *args, f"detections={path}", "overwrite=true"]) == 0
    assert path.read_bytes() == before
    assert not [p.name for p in tmp_path.iterdir() if p.name != path.name]  # no temporary left


def test_detr_evaluate_detections_do_not_depend_on_the_batch(overfit_detr, tmp_path):
    """Each image's detections are the same (1e-5, boxes normalised by the image size) whether
    it is evaluated alone or padded in a batch with images of other sizes."""
    args, _, ann_file, _ = overfit_detr
    coco = json.loads(ann_file.read_text())
    sizes = {im["id"]: (im["width"], im["height"]) for im in coco["images"]}
    assert len(set(sizes.values())) == len(sizes) == 8  # every batch of several is padded
    runs = {}
    for batch in (1, 3, 8):
        path = tmp_path / f"batch{batch}.json"
        assert (
            main(["detr", "evaluate", *args, f"train.batch_size={batch}", f"detections={path}"])
            == 0
        )
        runs[batch] = json.loads(path.read_text())
    alone = runs[1]
    for batch in (3, 8):
        dets = runs[batch]
        assert [(d["image_id"], d["category_id"]) for d in dets] == [
            (d["image_id"], d["category_id"]) for d in alone
        ]
        scale = np.array([sizes[d["image_id"]] * 2 for d in alone], dtype=float)
        boxes = np.array([d["bbox"] for d in dets]) / scale
        np.testing.assert_allclose(
            boxes, np.array([d["bbox"] for d in alone]) / scale, atol=1e-5, rtol=0
        )
        np.testing.assert_allclose(
            [d["score"] for d in dets], [d["score"] for d in alone], atol=1e-5, rtol=0
        )
    # the detections differ from image to image, so the equalities are not vacuous
    assert np.ptp([d["score"] for d in alone]) > 1e-3


def test_detr_train_device_auto_is_the_cpu_here_and_an_unusable_device_is_refused(tmp_path):
    """``train.device``: ``auto`` picks CUDA only when torch sees a GPU; ``cuda`` on a CPU-only
    build, or a made-up device, is a ConfigError naming the key before any data is written."""
    from pcreg.config import ConfigError
    from pcreg.engine.detection import _train_device

    assert _train_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert _train_device("cpu") == torch.device("cpu")
    with pytest.raises(ConfigError, match=r"^train\.device: unknown device 'tpu'"):
        _train_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="CUDA is not available"):
            _train_device("cuda")
        args = ["detr", "train", f"data.root={tmp_path / 'data'}", "train.device=cuda",
                "+data.generate={train_images: 4, val_images: 2, seed: 0}",
                f"out_dir={tmp_path / 'run'}"]  # fmt: skip
        assert main(args) == 2
        assert not (tmp_path / "data").exists()


def test_detr_shapes_30k_is_stage_two_of_detr_shapes():
    """The shipped checkpoint's second stage (model card) starts from what stage 1 writes, with
    stage 1's recipe over 30000 images whose first 6000 are stage 1's, and the same validation
    images (one generator seed for both stages)."""
    from pathlib import Path

    from pcreg._compose import compose

    one, two = (
        compose("detr", ["experiment=detr_shapes"]),
        compose("detr", ["experiment=detr_shapes_30k"]),
    )
    assert Path(two["init"]) == Path(one["out_dir"]) / "checkpoint.pt"
    assert two["data"]["generate"] == {**one["data"]["generate"], "train_images": 30000}
    assert two["data"]["root"] != one["data"]["root"] and two["out_dir"] != one["out_dir"]
    assert {k: v for k, v in two["train"].items() if k not in ("epochs", "eval_every")} == {
        k: v for k, v in one["train"].items() if k not in ("epochs", "eval_every")
    }
    steps = two["train"]["epochs"] * math.ceil(
        two["data"]["generate"]["train_images"] / two["train"]["batch_size"]
    )
    assert steps == 16875  # the model card's step count


def test_detr_stage_two_without_its_first_stage_is_refused_before_any_data(tmp_path):
    """``init`` names a missing checkpoint: exit 2 with the hint, before 30000 images are
    generated or ``out_dir`` is made."""
    args = ["detr", "train", "experiment=detr_shapes_30k", f"data.root={tmp_path / 'data'}",
            f"init={tmp_path / 'stage1.pt'}", f"out_dir={tmp_path / 'run'}"]  # fmt: skip
    assert main(args) == 2
    assert not (tmp_path / "data").exists() and not (tmp_path / "run").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_detr_trains_on_a_gpu_and_saves_weights_that_load_on_the_cpu(tmp_path):
    """``train.device=cuda``: the run says so, its checkpoint and the drawn sample are CPU
    tensors, and the CPU scores the checkpoint like the GPU did (TF32 convolutions differ a
    little)."""
    from pcreg._compose import compose
    from pcreg.config import from_dict
    from pcreg.engine.checkpoint import load_checkpoint
    from pcreg.engine.configs import DetrExperimentConfig
    from pcreg.engine.detection import evaluate_detr, train_detr

    overrides = [
        f"data.root={tmp_path / 'data'}", "data.val_split=train", f"out_dir={tmp_path / 'run'}",
        "+data.generate={train_images: 8, val_images: 2, seed: 0}", "train.epochs=20",
        "train.batch_size=8", "train.eval_every=0", "model.d_model=32", "model.ffn_dim=64",
        "model.backbone_widths=[8,16,32]", "train.device=cuda",
    ]  # fmt: skip
    run = train_detr(from_dict(DetrExperimentConfig, compose("detr", overrides)))
    assert run.metrics["device"].startswith("cuda")
    state = load_checkpoint(tmp_path / "run" / "checkpoint.pt", kind="detr")["model"]
    assert all(v.device.type == "cpu" for v in state.values())
    assert run.sample.images.device.type == "cpu" and run.sample.outputs["pred_boxes"].is_cpu
    on_cpu = evaluate_detr(
        from_dict(DetrExperimentConfig, compose("detr", [*overrides[:-1], "train.device=cpu"]))
    )
    assert on_cpu["mAP"] == pytest.approx(run.metrics["mAP"], abs=0.02)
