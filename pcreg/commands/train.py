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

__all__ = ["add_parser", "run_detr", "run_train", "run_vit"]


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
        "overwrite=true).",
        positional=("action", ["train", "evaluate"]),
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
