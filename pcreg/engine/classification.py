"""Train and evaluate the ViT classifier on the digits images (``pcreg vit train|evaluate``).

Training writes ``checkpoint.pt`` and ``metrics.json`` into ``out_dir`` and returns what the
pictures ``training_curves.png`` and ``attention_rollout.png`` show (the metrics' ``history``
and a :class:`RolloutSample`); ``pcreg vit train`` draws them there. Everything is seeded by
``train.seed`` / ``data.seed``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from pcreg._fs import atomic_output, check_writable
from pcreg.config import from_dict, to_dict
from pcreg.data.vision.digits import load_digits_split, random_shift
from pcreg.engine.checkpoint import load_checkpoint, save_checkpoint
from pcreg.engine.configs import ViTExperimentConfig
from pcreg.models.vit import VisionTransformer, ViTConfig, attention_rollout

__all__ = [
    "OUTPUTS",
    "RolloutSample",
    "ViTTraining",
    "evaluate_vit",
    "rollout_sample",
    "train_vit",
]

logger = logging.getLogger(__name__)

#: What a training run leaves in ``out_dir``; all are checked before training starts.
OUTPUTS = ("checkpoint.pt", "metrics.json", "training_curves.png", "attention_rollout.png")


@dataclasses.dataclass
class RolloutSample:
    """Test images, the attention-rollout relevance of their patches for the class token, and
    the true / predicted labels: what ``attention_rollout.png`` shows."""

    images: np.ndarray  # (B, H, W) grey in [0, 1]
    relevance: np.ndarray  # (B, g, g)
    labels: list[int]
    predictions: list[int]


@dataclasses.dataclass
class ViTTraining:
    """:func:`train_vit`'s result: ``metrics`` as written to ``metrics.json`` (with the
    per-epoch ``history``) and the rollout of the first ``rollout_images`` test images."""

    metrics: dict[str, Any]
    rollout: RolloutSample


def _write_json(path: Path, data: dict[str, Any], overwrite: bool) -> None:
    with atomic_output(path, overwrite=overwrite) as tmp:
        tmp.write_text(json.dumps(data, indent=2) + "\n")


def warmup_cosine(step: int, total: int, warmup: int) -> float:
    """LR multiplier: linear warm-up over ``warmup`` steps, then cosine decay to 0 at ``total``."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


@torch.no_grad()
def _evaluate(
    model: VisionTransformer, images: torch.Tensor, labels: torch.Tensor
) -> tuple[float, float]:
    model.eval()
    logits = model(images)
    loss = F.cross_entropy(logits, labels).item()
    acc = (logits.argmax(1) == labels).float().mean().item()
    return loss, acc


@torch.no_grad()
def rollout_sample(
    model: VisionTransformer, images: torch.Tensor, labels: torch.Tensor
) -> RolloutSample:
    """Classify ``images (B, 1, H, W)`` and roll their attention out (Abnar & Zuidema 2020)."""
    model.eval()
    logits, attn = model(images, return_attention=True)
    g = model.grid
    rel = attention_rollout(attn).reshape(-1, g, g)
    return RolloutSample(
        images[:, 0].numpy(), rel.numpy(), labels.tolist(), logits.argmax(1).tolist()
    )


def train_vit(cfg: ViTExperimentConfig) -> ViTTraining:
    """Train, then write the checkpoint and ``metrics.json``. Returns the metrics and the
    attention rollout of ``rollout_images`` test images for the caller to draw (every name of
    :data:`OUTPUTS` is checked for writing first: a run fails before training, not after)."""
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in OUTPUTS:  # fail before training, not after
        check_writable(out / name, overwrite=cfg.overwrite)
    t = cfg.train
    if t.num_threads > 0:
        torch.set_num_threads(t.num_threads)
    torch.manual_seed(t.seed)  # parameter init
    gen = torch.Generator().manual_seed(t.seed)  # shuffling, augmentation
    split = load_digits_split(cfg.data.seed, cfg.data.test_fraction)
    model = VisionTransformer(cfg.model)
    opt = torch.optim.AdamW(model.parameters(), lr=t.lr, weight_decay=t.weight_decay)
    n = len(split.train_labels)
    steps_per_epoch = math.ceil(n / t.batch_size)
    total = t.epochs * steps_per_epoch
    warmup = t.warmup_epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: warmup_cosine(s, total, warmup))
    history: dict[str, list[float]] = {
        "epoch": [],
        "train_loss": [],
        "test_loss": [],
        "train_accuracy": [],
        "test_accuracy": [],
    }
    start = time.perf_counter()
    bar = tqdm(range(t.epochs), desc="vit train", unit="epoch")
    for epoch in bar:
        model.train()
        perm = torch.randperm(n, generator=gen)
        seen = correct = 0
        loss_sum = 0.0
        for i in range(0, n, t.batch_size):
            idx = perm[i : i + t.batch_size]
            x = random_shift(split.train_images[idx], t.max_shift, gen)
            y = split.train_labels[idx]
            logits = model(x)
            loss = F.cross_entropy(logits, y, label_smoothing=t.label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if t.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
            opt.step()
            sched.step()
            seen += len(idx)
            loss_sum += loss.item() * len(idx)
            correct += (logits.argmax(1) == y).sum().item()
        test_loss, test_acc = _evaluate(model, split.test_images, split.test_labels)
        for key, value in (
            ("epoch", epoch + 1),
            ("train_loss", loss_sum / seen),
            ("test_loss", test_loss),
            ("train_accuracy", correct / seen),
            ("test_accuracy", test_acc),
        ):
            history[key].append(value)
        bar.set_postfix(loss=f"{loss_sum / seen:.3f}", test_acc=f"{test_acc:.3f}")
    seconds = time.perf_counter() - start
    metrics = {
        "test_accuracy": history["test_accuracy"][-1],
        "test_loss": history["test_loss"][-1],
        "train_accuracy": history["train_accuracy"][-1],
        "num_train": n,
        "num_test": len(split.test_labels),
        "epochs": t.epochs,
        "train_time_s": round(seconds, 2),
        "threads": torch.get_num_threads(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "history": history,
    }
    save_checkpoint(
        out / "checkpoint.pt",
        "vit",
        model.state_dict(),
        overwrite=cfg.overwrite,
        config=to_dict(cfg),
        epoch=t.epochs,
        metrics={k: v for k, v in metrics.items() if k != "history"},
    )
    _write_json(out / "metrics.json", metrics, cfg.overwrite)
    k = min(cfg.rollout_images, len(split.test_labels))
    rollout = rollout_sample(model, split.test_images[:k], split.test_labels[:k])
    logger.info(
        "test accuracy %.4f after %d epochs in %.1f s; outputs in %s",
        metrics["test_accuracy"],
        t.epochs,
        seconds,
        out,
    )
    return ViTTraining(metrics, rollout)


def evaluate_vit(cfg: ViTExperimentConfig) -> dict[str, Any]:
    """Score a checkpoint on the test split its own config names; writes ``evaluation.json``."""
    ckpt_path = Path(cfg.checkpoint) if cfg.checkpoint else Path(cfg.out_dir) / "checkpoint.pt"
    ckpt = load_checkpoint(ckpt_path, kind="vit")
    trained = from_dict(ViTExperimentConfig, ckpt["config"])
    model = VisionTransformer(from_dict(ViTConfig, ckpt["config"]["model"]))
    model.load_state_dict(ckpt["model"])
    split = load_digits_split(trained.data.seed, trained.data.test_fraction)
    loss, acc = _evaluate(model, split.test_images, split.test_labels)
    result = {
        "checkpoint": str(ckpt_path),
        "test_accuracy": acc,
        "test_loss": loss,
        "num_test": len(split.test_labels),
    }
    _write_json(ckpt_path.parent / "evaluation.json", result, overwrite=True)
    return result
