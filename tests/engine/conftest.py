"""Fixtures shared by the engine's test files."""

from __future__ import annotations

import fcntl
import json
import shutil
from pathlib import Path

import pytest


def _train_tiny_detr(root: Path) -> tuple[list[str], dict]:
    """Train the tiny DETR into ``root``; ``(evaluate overrides, train's metrics)``."""
    from pcreg._compose import compose
    from pcreg.config import from_dict
    from pcreg.engine.configs import DetrExperimentConfig
    from pcreg.engine.detection import train_detr

    args = [
        "train.device=cpu",  # exact comparisons: the CPU's arithmetic, on any machine
        f"data.root={root / 'data'}", "data.val_split=train", f"out_dir={root / 'run'}",
        "model.d_model=32", "model.ffn_dim=64", "model.backbone_widths=[8,16,32]",
        "train.batch_size=8",
    ]  # fmt: skip
    train = [
        "+data.generate={train_images: 8, val_images: 2, seed: 0}", "train.epochs=40",
        "train.lr=2e-3", "train.lr_backbone=2e-3", "train.eval_every=0",
        f"detections={root / 'train_detections.json'}",
    ]  # fmt: skip
    run = train_detr(from_dict(DetrExperimentConfig, compose("detr", args + train)))
    return args, run.metrics


@pytest.fixture(scope="session")
def overfit_detr(tmp_path_factory, worker_id) -> tuple[list[str], dict, Path, Path]:
    """A tiny DETR overfitted to 8 generated images (40 steps) and scored on those same
    images, so that its COCO numbers are not all zero (an untrained model's are); training
    also writes its final detections (``ROOT/train_detections.json``). Returns the overrides
    that evaluate it, train's metrics, the annotation file and ROOT (checkpoint in
    ``ROOT/run``). Trained once per test run: under pytest-xdist the first worker to ask
    trains it into the run's shared temporary folder (a lock file orders them) and the other
    reads it (12-40 s each, when test_detection.py and test_detection_predict.py trained
    their own)."""
    if worker_id == "master":  # one process: its own temporary folder
        root = tmp_path_factory.mktemp("detr")
        args, metrics = _train_tiny_detr(root)
    else:
        root = tmp_path_factory.getbasetemp().parent / "overfit_detr"  # this run's, shared
        with open(f"{root}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes (or we die)
            done = root / "trained.json"
            if not done.is_file():
                shutil.rmtree(root, ignore_errors=True)  # a worker that died half-way
                args, metrics = _train_tiny_detr(root)
                done.write_text(json.dumps({"args": args, "metrics": metrics}))
            record = json.loads(done.read_text())
        args, metrics = record["args"], record["metrics"]
    return args, metrics, root / "data/annotations/train.json", root
