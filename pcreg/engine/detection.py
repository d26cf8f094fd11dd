"""Train and evaluate DETR on COCO-format data (``pcreg detr train|evaluate``).

``data.root`` holds ``<split>/*.png`` and ``annotations/<split>.json``; with ``data.generate``
the synthetic shapes are written there first (:mod:`pcreg.data.vision.shapes`). Evaluation is
pycocotools' ``COCOeval`` (the maintained reference implementation of COCO box AP): every query
becomes a detection scored by its best real-class probability. Training writes ``checkpoint.pt``
and ``metrics.json`` into ``out_dir`` and returns what ``training_curves.png`` and
``predictions.png`` show (the metrics' ``history`` and a :class:`DetectionSample`); ``pcreg detr
train`` draws them there. With ``detections=FILE.json`` both also write the scored detections as
a standard COCO results file (:func:`write_coco_results`), which pycocotools' ``COCO.loadRes``
and ``COCOeval`` score to the same numbers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from pcreg._fs import atomic_output, check_writable
from pcreg.config import to_dict
from pcreg.data.vision.coco import CocoDetection, collate_images
from pcreg.engine.checkpoint import load_checkpoint, save_checkpoint
from pcreg.engine.configs import DetrExperimentConfig
from pcreg.models.detr import HungarianMatcher, SetCriterion, build_detr

__all__ = [
    "OUTPUTS",
    "SHIPPED_DETR",
    "DetectionSample",
    "DetrTraining",
    "coco_evaluate",
    "evaluate_detr",
    "predictions_to_coco",
    "train_detr",
    "write_coco_results",
]

logger = logging.getLogger(__name__)

#: the DETR checkpoint trained on the generated shapes that ships with pcreg (model card:
#: ``detr_shapes.md`` beside it)
SHIPPED_DETR = Path(__file__).resolve().parents[1] / "weights" / "detr_shapes.pt"

#: What a training run leaves in ``out_dir``; all are checked before training starts.
OUTPUTS = ("checkpoint.pt", "metrics.json", "training_curves.png", "predictions.png")


@dataclasses.dataclass
class DetectionSample:
    """The first validation batch with the model's raw output (``pred_logits``,
    ``pred_boxes``) and the category names: what ``predictions.png`` shows."""

    images: torch.Tensor  # (B, 3, H, W), normalised as pcreg.data.vision.coco does
    valid: torch.Tensor
    targets: list[dict]
    outputs: dict[str, torch.Tensor]
    names: list[str]


@dataclasses.dataclass
class DetrTraining:
    """:func:`train_detr`'s result: ``metrics`` as written to ``metrics.json`` (COCOeval's
    numbers, timings and the per-epoch ``history``) and the first validation batch."""

    metrics: dict[str, Any]
    sample: DetectionSample


def _dataset(cfg: DetrExperimentConfig, split: str) -> CocoDetection:
    root = Path(cfg.data.root)
    ann = root / "annotations" / f"{split}.json"
    g = cfg.data.generate
    if g is not None and not ann.exists():
        from pcreg.data.vision.shapes import write_shapes_dataset

        n, seed = (
            (g.train_images, g.seed)
            if split == cfg.data.train_split
            else (g.val_images, g.seed + 1)
        )
        write_shapes_dataset(root, split, n, seed)
    return CocoDetection(root / split, ann)


def _batches(
    ds: CocoDetection, order: list[int], batch_size: int, device: torch.device | None = None
):
    """Collated batches of ``ds[order]``; images, masks and the targets' ``boxes`` / ``labels``
    moved to ``device`` (default: left on the CPU)."""
    for i in range(0, len(order), batch_size):
        images, valid, targets = collate_images([ds[j] for j in order[i : i + batch_size]])
        if device is not None and device.type != "cpu":
            images, valid = images.to(device, non_blocking=True), valid.to(device)
            targets = [
                {**t, "boxes": t["boxes"].to(device), "labels": t["labels"].to(device)}
                for t in targets
            ]
        yield images, valid, targets


def _train_device(name: str) -> torch.device:
    """``train.device``: ``auto`` is CUDA when this torch sees a GPU, else the CPU; an explicit
    device this build cannot use is a :class:`~pcreg.config.ConfigError` naming the key
    (:func:`pcreg.engine.devices.resolve_device`)."""
    from pcreg.config import ConfigError
    from pcreg.engine.devices import resolve_device
    from pcreg.errors import InputError

    try:
        return resolve_device(name)
    except InputError as err:
        problem = err.problem.replace("use cpu or", "use auto, cpu or")
        raise ConfigError("train.device", problem) from None


def predictions_to_coco(
    outputs: dict[str, torch.Tensor], targets: list[dict], categories: list[int]
) -> list[dict]:
    """COCO result entries from one batch: every query of every image, in query order.

    ``outputs``: ``pred_logits (B, Q, K + 1)`` (the last class is "no object") and
    ``pred_boxes (B, Q, 4)``, normalised ``(cx, cy, w, h)`` relative to each image's own
    (unpadded) size; ``targets[b]`` gives ``image_id`` and ``size (H, W)`` in pixels.
    ``categories``: the K COCO category ids, in label order. Each entry is ``{"image_id",
    "category_id", "bbox": [x, y, w, h], "score"}``: the most likely real class and its
    probability, the box in pixels of the original image, clipped to it
    (``0 <= x <= x + w <= W``, the same for y; the centre is always inside, so ``w, h > 0``).
    """
    prob = outputs["pred_logits"].detach().softmax(-1)[..., :-1]
    scores, labels = prob.max(-1)
    scores_b, labels_b = scores.cpu().tolist(), labels.cpu().tolist()
    results = []
    for b, t in enumerate(targets):
        h, w = t["size"]
        cx, cy, bw, bh = outputs["pred_boxes"][b].detach().cpu().double().numpy().T
        x0, x1 = np.clip(cx - bw / 2, 0, 1) * w, np.clip(cx + bw / 2, 0, 1) * w
        y0, y1 = np.clip(cy - bh / 2, 0, 1) * h, np.clip(cy + bh / 2, 0, 1) * h
        boxes = np.stack([x0, y0, x1 - x0, y1 - y0], axis=1).tolist()
        image_id = int(t["image_id"])
        results += [
            {"image_id": image_id, "category_id": categories[label], "bbox": box, "score": score}
            for label, box, score in zip(labels_b[b], boxes, scores_b[b], strict=True)
        ]
    return results


def coco_evaluate(
    ann_file: Path, results: list[dict], image_ids: list[int] | None = None
) -> dict[str, float]:
    """pycocotools COCOeval (bbox): the 12 standard numbers; ``mAP`` = AP@[.5:.95], ``AP50``.
    ``image_ids`` restricts it to those images (quick checks on a subset during training).
    ``results`` is left as given (pycocotools' ``loadRes`` adds keys to the entries it gets, so
    it gets copies)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(ann_file))
        dt = gt.loadRes([dict(r) for r in results]) if results else COCO()
        ev = COCOeval(gt, dt, "bbox")
        if image_ids is not None:
            ev.params.imgIds = sorted(image_ids)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    names = ["mAP", "AP50", "AP75", "AP_small", "AP_medium", "AP_large",
             "AR1", "AR10", "AR100", "AR_small", "AR_medium", "AR_large"]  # fmt: skip
    return {n: float(v) for n, v in zip(names, ev.stats, strict=True)}


@torch.no_grad()
def _evaluate(model, ds: CocoDetection, batch_size: int, limit: int | None = None):
    """Detections of ``ds[:limit]`` on the model's device; the first batch (on the CPU) is
    returned for drawing."""
    model.eval()
    device = next(model.parameters()).device
    order = list(range(len(ds) if limit is None else min(limit, len(ds))))
    results, shown = [], None
    for images, valid, targets in _batches(ds, order, batch_size, device):
        out = model(images, valid)
        results += predictions_to_coco(out, targets, ds.categories)
        if shown is None:
            cpu = [{**t, "boxes": t["boxes"].cpu(), "labels": t["labels"].cpu()} for t in targets]
            outputs = {k: v.cpu() for k, v in out.items() if k != "aux_outputs"}
            shown = (images.cpu(), valid.cpu(), cpu, outputs)
    return results, shown


def write_coco_results(path: str | Path, results: list[dict], *, overwrite: bool = False) -> Path:
    """Write ``results`` (:func:`predictions_to_coco`'s entries: ``image_id``, ``category_id``,
    ``bbox`` [x, y, w, h] in pixels, ``score`` in [0, 1]) to ``path`` as a COCO results file, a
    JSON list, atomically. Floats are written at full precision (``repr``), so the file scores
    to exactly the numbers of the entries in memory.

    Raises:
        OutputExistsError: ``path`` exists and ``overwrite`` is False.
        UnwritableOutputError: see :func:`pcreg._fs.check_writable`.
    """
    keys = ("image_id", "category_id", "bbox", "score")
    lines = [json.dumps({k: r[k] for k in keys}, allow_nan=False) for r in results]
    with atomic_output(path, overwrite=overwrite) as tmp:
        tmp.write_text("[\n" + ",\n".join(lines) + "\n]\n")  # one detection a line
    return Path(path)


def _write_json(path: Path, data: dict[str, Any], overwrite: bool) -> None:
    with atomic_output(path, overwrite=overwrite) as tmp:
        tmp.write_text(json.dumps(data, indent=2) + "\n")


def _build(cfg: DetrExperimentConfig):
    model = build_detr(cfg.model)
    matcher = HungarianMatcher(cfg.loss.cost_class, cfg.loss.cost_bbox, cfg.loss.cost_giou)
    criterion = SetCriterion(
        cfg.model.num_classes, matcher, cfg.loss.eos_coef, cfg.loss.weight_ce,
        cfg.loss.weight_bbox, cfg.loss.weight_giou,
    )  # fmt: skip
    return model, criterion


def train_detr(cfg: DetrExperimentConfig) -> DetrTraining:
    """Train, evaluate on the validation split with COCOeval, write the checkpoint and
    ``metrics.json``. Returns those metrics and the first validation batch's detections for the
    caller to draw (every name of :data:`OUTPUTS` is checked for writing before training)."""
    t = cfg.train
    device = _train_device(t.device)  # refused before anything is written
    if cfg.init and cfg.init != "shipped" and not Path(cfg.init).is_file():
        from pcreg.errors import MissingFileError

        raise MissingFileError(
            cfg.init, "init: no checkpoint to start from (a staged recipe such as "
            "experiment=detr_shapes_30k starts from its first stage's out_dir: run that first, "
            "or pass init=shipped)",
        )  # fmt: skip
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in OUTPUTS:
        check_writable(out / name, overwrite=cfg.overwrite)
    if cfg.detections:
        check_writable(cfg.detections, overwrite=cfg.overwrite)
    if t.num_threads > 0:
        torch.set_num_threads(t.num_threads)
    train_ds = _dataset(cfg, cfg.data.train_split)
    val_ds = _dataset(cfg, cfg.data.val_split)
    if (
        train_ds.categories != val_ds.categories
        or len(train_ds.categories) != cfg.model.num_classes
    ):
        raise ValueError(
            f"model.num_classes={cfg.model.num_classes} but the data has categories "
            f"{train_ds.categories} / {val_ds.categories}"
        )
    torch.manual_seed(t.seed)
    model, criterion = _build(cfg)
    if cfg.init:
        _load_init(model, cfg.init)
    model.to(device)
    criterion.to(device)
    backbone = [p for n, p in model.named_parameters() if n.startswith("backbone.")]
    rest = [p for n, p in model.named_parameters() if not n.startswith("backbone.")]
    opt = torch.optim.AdamW(
        [{"params": rest, "lr": t.lr}, {"params": backbone, "lr": t.lr_backbone}],
        weight_decay=t.weight_decay,
    )
    steps_per_epoch = math.ceil(len(train_ds) / t.batch_size)
    total = t.epochs * steps_per_epoch
    drop_at = int(t.lr_drop_fraction * total)
    history: dict[str, list[float]] = {"epoch": [], "train_loss": [], "val_AP50": [], "val_mAP": []}
    rng = np.random.default_rng(t.seed)
    start, step = time.perf_counter(), 0
    bar = tqdm(total=total, desc="detr train", unit="step")
    for epoch in range(t.epochs):
        model.train()
        losses = []
        for images, valid, targets in _batches(
            train_ds, rng.permutation(len(train_ds)).tolist(), t.batch_size, device
        ):
            if step == drop_at:  # DETR's single step decay
                for g in opt.param_groups:
                    g["lr"] *= 0.1
            loss = criterion(model(images, valid), targets)["loss"]
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if t.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
            opt.step()
            losses.append(float(loss.detach()))
            step += 1
            bar.update(1)
            bar.set_postfix(epoch=epoch, loss=f"{losses[-1]:.3f}")
        history["epoch"].append(epoch + 1)
        history["train_loss"].append(float(np.mean(losses)))
        if t.eval_every > 0 and (epoch + 1) % t.eval_every == 0 and epoch + 1 < t.epochs:
            results, _ = _evaluate(model, val_ds, t.batch_size, t.eval_limit)
            ids = {r["image_id"] for r in results}
            ap = coco_evaluate(val_ds.ann_file, results, image_ids=list(ids))
            logger.info("epoch %d: loss %.3f, val AP50 %.3f, mAP %.3f (%d images)", epoch + 1,
                        history["train_loss"][-1], ap["AP50"], ap["mAP"], t.eval_limit)  # fmt: skip
        else:
            ap = {"AP50": float("nan"), "mAP": float("nan")}
        history["val_AP50"].append(ap["AP50"])
        history["val_mAP"].append(ap["mAP"])
    bar.close()
    train_time = time.perf_counter() - start
    results, shown = _evaluate(model, val_ds, t.batch_size)
    metrics = coco_evaluate(val_ds.ann_file, results)
    if cfg.detections:
        write_coco_results(cfg.detections, results, overwrite=cfg.overwrite)
    if history["epoch"]:  # the last epoch's point is the full validation set's
        history["val_AP50"][-1], history["val_mAP"][-1] = metrics["AP50"], metrics["mAP"]
    metrics.update(
        train_time_s=train_time, steps=step, val_images=len(val_ds), train_images=len(train_ds),
        threads=torch.get_num_threads(), device=str(device),
    )  # fmt: skip
    categories = [[c, n] for c, n in zip(val_ds.categories, _names(val_ds), strict=True)]
    state = {k: v.cpu() for k, v in model.state_dict().items()}  # loads anywhere
    save_checkpoint(out / "checkpoint.pt", "detr", state, overwrite=cfg.overwrite,
                    config=to_dict(cfg), metrics=metrics, categories=categories)  # fmt: skip
    record = {**metrics, "history": history}
    _write_json(out / "metrics.json", record, cfg.overwrite)
    return DetrTraining(record, DetectionSample(*shown, names=_names(val_ds)))


def _load_init(model: torch.nn.Module, init: str) -> None:
    """Start from the weights of a DETR checkpoint (``"shipped"``: the one in pcreg/weights).

    Raises:
        ConfigError: its weights do not fit this configuration's model."""
    from pcreg.config import ConfigError

    path = SHIPPED_DETR if init == "shipped" else Path(init)
    state = load_checkpoint(path, kind="detr")["model"]
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        first = str(err).strip().splitlines()[0]
        raise ConfigError("init", f"{path}: its weights do not fit model.* ({first})") from None
    logger.info("starting from the weights of %s", path)


def _names(ds: CocoDetection) -> list[str]:
    coco = json.loads(ds.ann_file.read_text())
    by_id = {c["id"]: c["name"] for c in coco["categories"]}
    return [by_id[c] for c in ds.categories]


def evaluate_detr(cfg: DetrExperimentConfig) -> dict[str, Any]:
    """COCOeval of ``checkpoint`` (default ``out_dir/checkpoint.pt``) on the validation split:
    :func:`coco_evaluate`'s numbers plus ``val_images``. With ``cfg.detections`` the detections
    scored are also written there (:func:`write_coco_results`; checked for writing first, an
    existing file replaced only with ``cfg.overwrite``)."""
    if cfg.detections:
        check_writable(cfg.detections, overwrite=cfg.overwrite)
    ckpt = load_checkpoint(cfg.checkpoint or Path(cfg.out_dir) / "checkpoint.pt", kind="detr")
    model, _ = _build(cfg)
    model.load_state_dict(ckpt["model"])
    model.to(_train_device(cfg.train.device))
    ds = _dataset(cfg, cfg.data.val_split)
    results, _ = _evaluate(model, ds, cfg.train.batch_size)
    metrics = {**coco_evaluate(ds.ann_file, results), "val_images": len(ds)}
    if cfg.detections:
        write_coco_results(cfg.detections, results, overwrite=cfg.overwrite)
    return metrics
