"""``pcreg train`` (the registration network), ``pcreg vit`` and ``pcreg detr``: compose the
configuration, run :mod:`pcreg.engine`'s trainer, draw its pictures into the run directory and
print the metrics as one JSON line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from pcreg.commands._hydra import add_hydra_subcommand
from pcreg.commands._paths import file_out, path_in

__all__ = ["add_parser", "run_detr", "run_detr_predict", "run_train", "run_vit"]


def add_parser(sub) -> None:
    add_hydra_subcommand(
        sub,
        "vit",
        run_vit,
        "train / evaluate the ViT classifier on the digits images",
        "e.g. `pcreg vit train experiment=vit_digits train.lr=1e-3`.",
        positional=("action", ["train", "evaluate"]),
    )
    add_hydra_subcommand(
        sub,
        "detr",
        run_detr,
        "train / evaluate the DETR detector (COCO format; synthetic shapes by default)",
        "e.g. `pcreg detr train experiment=detr_shapes train.epochs=10`; "
        "`pcreg detr evaluate out_dir=DIR detections=dets.json` also writes the validation "
        "detections (`detr train`: its final evaluation's) as a COCO results file (a JSON "
        "list of image_id, category_id, bbox [x, y, w, h] in pixels, score; the path is "
        "relative to the working directory; an existing file is replaced only with "
        "overwrite=true). `pcreg detr predict IMAGE... [--render PNG] [--checkpoint PT] "
        "[--threshold 0.5] [--json] [--force]` runs a trained DETR (default: the shipped "
        "detr_shapes checkpoint) on image files.",
        positional=("action", ["train", "evaluate", "predict"]),
        remainder=True,
    )
    add_hydra_subcommand(
        sub,
        "train",
        run_train,
        "train the registration network (torchrun-compatible)",
        "e.g. `pcreg train experiment=synthetic_indoor train.epochs=5`; "
        "`torchrun --nproc_per_node=2 -m pcreg train ...` for DDP.",
    )


def _print_json(metrics: dict) -> None:
    sys.stdout.write(json.dumps({k: v for k, v in metrics.items() if k != "history"}) + "\n")


def run_vit(args: argparse.Namespace) -> int:
    from pcreg._compose import compose
    from pcreg.config import from_dict
    from pcreg.engine.classification import evaluate_vit, train_vit
    from pcreg.engine.configs import ViTExperimentConfig

    cfg = from_dict(ViTExperimentConfig, compose("vit", args.overrides))
    if args.action == "evaluate":
        _print_json(evaluate_vit(cfg))
        return 0
    from pcreg.viz.plots import save_attention_rollout_png, save_training_curves_png

    run = train_vit(cfg)
    out, m, r = Path(cfg.out_dir), run.metrics, run.rollout
    save_training_curves_png(
        m["history"],
        out / "training_curves.png",
        panels=[["train_loss", "test_loss"], ["train_accuracy", "test_accuracy"]],
        title=f"ViT on digits: test accuracy {m['test_accuracy']:.4f}, {cfg.train.epochs} epochs",
        overwrite=cfg.overwrite,
    )
    save_attention_rollout_png(
        r.images,
        r.relevance,
        r.labels,
        r.predictions,
        out / "attention_rollout.png",
        overwrite=cfg.overwrite,
    )
    _print_json(m)
    return 0


def run_detr(args: argparse.Namespace) -> int:
    from pcreg._compose import compose
    from pcreg.config import from_dict
    from pcreg.engine.configs import DetrExperimentConfig
    from pcreg.engine.detection import evaluate_detr, train_detr

    if args.action == "predict":
        return run_detr_predict(args.overrides)
    if any(a in ("-h", "--help") for a in args.overrides):  # the remainder took the flag
        args.parser.print_help()
        return 0
    cfg = from_dict(DetrExperimentConfig, compose("detr", args.overrides))
    if args.action == "evaluate":
        _print_json(evaluate_detr(cfg))
        return 0
    from pcreg.viz.detections import save_detections_png
    from pcreg.viz.plots import save_training_curves_png

    run = train_detr(cfg)
    out, s = Path(cfg.out_dir), run.sample
    save_training_curves_png(
        run.metrics["history"],
        out / "training_curves.png",
        panels=[["train_loss"], ["val_AP50", "val_mAP"]],
        title=f"DETR on {cfg.data.root}",
        overwrite=cfg.overwrite,
    )
    save_detections_png(
        out / "predictions.png",
        s.images,
        s.valid,
        s.targets,
        s.outputs,
        names=s.names,
        overwrite=cfg.overwrite,
    )
    _print_json(run.metrics)
    return 0


def run_train(args: argparse.Namespace) -> int:
    from pcreg._compose import compose
    from pcreg.config import from_dict
    from pcreg.engine.configs import TrainConfig
    from pcreg.engine.train import train_registration, training_history

    cfg = from_dict(TrainConfig, compose("train", args.overrides))
    metrics = train_registration(cfg)
    if int(os.environ.get("RANK", "0")) == 0:
        history = training_history(cfg.train.out_dir)
        if history is not None:
            from pcreg.viz.plots import save_training_curves_png

            save_training_curves_png(
                history,
                Path(cfg.train.out_dir) / "training_curves.png",
                panels=[
                    ["train_loss", "val_loss"],
                    ["val_registration_recall", "val_inlier_ratio"],
                ],
                title="registration training",
            )
        sys.stdout.write(json.dumps(metrics) + "\n")
    return 0


#: images drawn by ``pcreg detr predict --render`` (all are predicted)
MAX_RENDERED = 16


def run_detr_predict(argv: list[str]) -> int:
    """``pcreg detr predict IMAGE... [--render PNG] [--checkpoint PT] [--threshold T]
    [--json] [--force]``: the detections of each image, one line per object (or one JSON
    object per image), and optionally a picture of them."""

    from pcreg.commands._common import check_kinds, check_outputs
    from pcreg.commands._parser import OneLineParser
    from pcreg.engine.detection_predict import Detector, load_detector
    from pcreg.errors import InputError, MissingFileError

    parser = OneLineParser(prog="pcreg detr predict")
    parser.add_argument("images", nargs="+", type=path_in)
    parser.add_argument(
        "--render", type=file_out, metavar="PNG",
        help=f"picture of the detections (the first {MAX_RENDERED} images)",
    )  # fmt: skip
    parser.add_argument("--checkpoint", type=Path, default=None, help="default: the shipped one")
    parser.add_argument("--threshold", type=float, default=0.5, help="lowest score shown")
    parser.add_argument("--json", action="store_true", help="one JSON object per image")
    parser.add_argument("--force", action="store_true", help="replace an existing --render")
    opts = parser.parse_args(argv)
    if not 0.0 <= opts.threshold <= 1.0:
        raise InputError("--threshold", f"must be in [0, 1], got {opts.threshold}")
    check_outputs([opts.render], opts.force, inputs=[*opts.images, opts.checkpoint])
    check_kinds(pictures=[opts.render])
    for path in opts.images:  # every path checked before the model loads
        if not path.is_file():
            raise MissingFileError(path, "image not found")
    detector = load_detector(opts.checkpoint)
    lines, shown, found_shown = [], [], []
    step = detector.batch_size
    for first in range(0, len(opts.images), step):  # a batch of images in memory at a time
        paths = opts.images[first : first + step]
        images = [Detector.read(p) for p in paths]
        found = detector(images, threshold=opts.threshold)
        if len(shown) < MAX_RENDERED:
            keep = MAX_RENDERED - len(shown)
            shown += images[:keep]
            found_shown += found[:keep]
        for path, dets in zip(paths, found, strict=True):
            if opts.json:
                row = {"image": str(path), "detections": [d.to_dict() for d in dets]}
                lines.append(json.dumps(row))
                continue
            lines.append(f"{path}: {len(dets)} object(s)")
            lines += [
                f"  {d.label:<10} {d.score:.3f}  x {d.bbox[0]:.1f} y {d.bbox[1]:.1f} "
                f"w {d.bbox[2]:.1f} h {d.bbox[3]:.1f} px"
                for d in dets
            ]
    if opts.render is not None:
        from pcreg.viz.detections import save_image_detections_png

        save_image_detections_png(
            opts.render, shown, found_shown, titles=[p.name for p in opts.images[: len(shown)]],
            threshold=opts.threshold, overwrite=opts.force,
        )  # fmt: skip
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
