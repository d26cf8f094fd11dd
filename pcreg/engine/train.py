"""Training loop of the registration network (``pcreg train``; ``torchrun``-compatible).

Determinism: the order of the training pairs of epoch e is a permutation drawn from
``(seed, e)``; every pair's augmentation and target sampling draw from generators seeded by
``(seed, epoch, pair index)``. The state of a run is therefore model + optimizer + step (+ the
torch RNG for any dropout), all in the checkpoint, and a resumed run continues exactly where the
interrupted one stopped. With N ranks each optimizer step consumes N x batch_size pairs, split
by rank in order, and DDP averages the gradients: the same update as one process with an N
times larger batch (the loss is a mean over pairs).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from pcreg._fs import check_writable
from pcreg.config import to_dict
from pcreg.data.collate import collate_pairs
from pcreg.data.transforms import augment_pair
from pcreg.engine.checkpoint import load_checkpoint, save_checkpoint
from pcreg.engine.configs import TrainConfig
from pcreg.engine.distributed import DistInfo, all_reduce_sum, barrier, cleanup, setup
from pcreg.engine.run_log import MetricsLog, write_run_record
from pcreg.errors import CorruptFileError, OutputExistsError
from pcreg.geometry.metrics import relative_rotation_error_deg, relative_translation_error
from pcreg.geometry.transforms import apply_transform
from pcreg.losses.total import build_targets, registration_loss
from pcreg.models.geotransformer import build_geotransformer
from pcreg.models.geotransformer.model import upgrade_state_dict

__all__ = ["epoch_history", "lr_factor", "train_registration", "training_history"]

logger = logging.getLogger(__name__)


def lr_factor(step: int, epoch: int, total_steps: int, cfg) -> float:
    """Warm-up (linear over ``warmup_steps``) times the epoch decay of ``cfg.scheduler``."""
    warm = min(1.0, (step + 1) / cfg.warmup_steps) if cfg.warmup_steps > 0 else 1.0
    if cfg.scheduler == "exponential":
        decay = cfg.gamma ** (epoch / cfg.step_epochs)
    elif cfg.scheduler == "step":
        decay = cfg.gamma ** (epoch // cfg.step_epochs)
    elif cfg.scheduler == "cosine":
        decay = 0.5 * (1 + math.cos(math.pi * min(1.0, step / max(1, total_steps))))
    elif cfg.scheduler == "none":
        decay = 1.0
    else:
        raise ValueError(f"unknown scheduler {cfg.scheduler!r}")
    return warm * decay


def _datasets(cfg: TrainConfig, info: DistInfo):
    from pcreg.data.kitti import KittiPairs
    from pcreg.data.threedmatch import ThreeDMatchPairs

    root = Path(cfg.data.root)
    g = cfg.data.generate
    meta = root / "metadata" / f"{cfg.data.train_split}.json"
    if (
        g is not None
        and not meta.exists()
        and not (root / "metadata" / f"{cfg.data.train_split}.pkl").exists()
    ):
        if info.is_main:
            from pcreg.data.synthetic.writer import write_indoor_dataset, write_outdoor_dataset

            write = write_indoor_dataset if g.kind == "indoor" else write_outdoor_dataset
            write(root, cfg.data.val_split, g.val_scenes, g.seed + 1_000_000, overwrite=True)
            write(root, cfg.data.train_split, g.train_scenes, g.seed, overwrite=True)
        barrier(info)
    if cfg.data.layout == "threedmatch":
        return ThreeDMatchPairs(root, cfg.data.train_split), ThreeDMatchPairs(
            root, cfg.data.val_split
        )
    if cfg.data.layout == "kitti":
        return KittiPairs(root, cfg.data.train_split), KittiPairs(root, cfg.data.val_split)
    raise ValueError(f"data.layout must be threedmatch or kitti, got {cfg.data.layout!r}")


def _collate(cfg: TrainConfig, items, device):
    m = cfg.model
    srcs = [torch.from_numpy(np.asarray(s, np.float32)) for s, _, _ in items]
    refs = [torch.from_numpy(np.asarray(r, np.float32)) for _, r, _ in items]
    trs = [torch.from_numpy(np.asarray(t, np.float32)) for _, _, t in items]
    return collate_pairs(srcs, refs, m, transforms=trs).to(device)


def _pair_generator(
    seed: int, epoch: int, index: int
) -> tuple[np.random.Generator, torch.Generator]:
    rng = np.random.default_rng([seed, epoch, index])
    gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
    return rng, gen


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


@torch.no_grad()
def _validate(model, val_set, cfg: TrainConfig, info: DistInfo, device) -> dict[str, float]:
    model.eval()
    n = (
        len(val_set)
        if cfg.data.max_val_pairs is None
        else min(cfg.data.max_val_pairs, len(val_set))
    )
    sums = {
        "pairs": 0.0,
        "registered": 0.0,
        "inlier_ratio": 0.0,
        "loss": 0.0,
        "rre_sum": 0.0,
        "rte_sum": 0.0,
    }
    aug = cfg.data.augmentation
    # validation pairs start from a random motion of the source (the rotation range of the
    # training augmentation, no noise), fixed per pair: an identity guess must not score
    val_aug = dataclasses.replace(aug, noise=0.0, scale=None, crop=None)
    for i in range(info.rank, n, info.world_size):  # sharded over ranks
        src, ref, t = val_set[i][:3]
        src, ref, t = augment_pair(
            src, ref, t, val_aug, np.random.default_rng([cfg.train.seed, 7, i])
        )
        batch = _collate(cfg, [(src, ref, t)], device)
        out = model(batch.pyramid, batch.feats, 1)
        targets, _ = build_targets(
            batch.pyramid,
            1,
            batch.transforms,
            cfg.model.num_points_in_patch,
            cfg.loss,
            torch.Generator().manual_seed(i),
        )
        loss = registration_loss(out, batch.transforms, targets, cfg.loss)["loss"]
        gt = batch.transforms[0].double().cpu()
        est = out.transform[0].double().cpu()
        r, s = out.ref_corr_points[0].cpu(), out.src_corr_points[0].cpu()
        ir = (
            float(
                (
                    torch.linalg.norm(apply_transform(s, gt.float()) - r, dim=1)
                    < cfg.model.acceptance_radius
                )
                .float()
                .mean()
            )
            if len(r)
            else 0.0
        )
        rre, rte = (
            float(relative_rotation_error_deg(est, gt)),
            float(relative_translation_error(est, gt)),
        )
        if cfg.data.success == "kitti":
            ok = rre < 5.0 and rte < 2.0
        else:
            pts = torch.from_numpy(np.asarray(src, np.float64))
            ok = (
                float(
                    torch.linalg.norm(apply_transform(pts, est) - apply_transform(pts, gt), dim=1)
                    .square()
                    .mean()
                    .sqrt()
                )
                <= 0.2
            )
        sums["pairs"] += 1
        sums["registered"] += ok
        sums["inlier_ratio"] += ir
        sums["loss"] += float(loss)
        sums["rre_sum"] += rre * ok
        sums["rte_sum"] += rte * ok
    tot = all_reduce_sum(sums, info)
    p, k = max(tot["pairs"], 1.0), max(tot["registered"], 1.0)
    return {
        "registration_recall": tot["registered"] / p,
        "inlier_ratio": tot["inlier_ratio"] / p,
        "loss": tot["loss"] / p,
        "rre_deg": tot["rre_sum"] / k,
        "rte_m": tot["rte_sum"] / k,
        "pairs": tot["pairs"],
    }


def train_registration(cfg: TrainConfig) -> dict[str, Any]:
    """Run (or resume) training; returns the final validation metrics (rank 0).

    ``train.out_dir`` receives ``last.pt``, ``best.pt``, ``run.json``, ``metrics.csv``,
    ``metrics.jsonl`` and TensorBoard events; :func:`training_history` reads the per-epoch
    curves back from it (``pcreg train`` draws them into ``training_curves.png``)."""
    if cfg.train.device != "auto":  # before any data is made: cuda on a CPU build says so
        from pcreg.engine.devices import check_device

        check_device(cfg.train.device)
    info = setup(
        cfg.train.device
        if cfg.train.device != "auto"
        else ("cuda" if torch.cuda.is_available() else "cpu")
    )
    try:
        return _train(cfg, info)
    finally:
        cleanup(info)


def _init_weights(model: torch.nn.Module, path: Path) -> None:
    """Copy the tensors of checkpoint ``path`` into ``model`` where name and shape agree.

    Kernel points stay as the model built them: they define what a kernel weight means (a
    cylindrical kernel started from a full-frame run keeps its own disposition)."""
    state = upgrade_state_dict(dict(load_checkpoint(path, kind=None)["model"]))
    own = model.state_dict()
    taken = {
        k: v.to(own[k].dtype)
        for k, v in state.items()
        if k in own and own[k].shape == v.shape and not k.endswith("kernel_points")
    }
    model.load_state_dict(taken, strict=False)
    logger.info("initialised %d of %d tensors from %s", len(taken), len(own), path)


def _train(cfg: TrainConfig, info: DistInfo) -> dict[str, Any]:
    t = cfg.train
    if t.num_threads > 0:
        torch.set_num_threads(t.num_threads)
    device = _device(t.device)
    if device.type == "cuda" and info.world_size > 1:
        device = torch.device("cuda", info.local_rank)
    out = Path(t.out_dir)
    last, best = out / "last.pt", out / "best.pt"
    ckpt = None
    if t.resume:
        ckpt = load_checkpoint(last, kind="geotransformer-train")
    elif info.is_main and last.exists() and not t.overwrite:
        raise OutputExistsError(
            last,
            "a run already lives here; train.resume=true continues it, "
            "train.overwrite=true starts over",
        )
    if info.is_main:
        out.mkdir(parents=True, exist_ok=True)
        check_writable(last, overwrite=True)
        write_run_record(out, to_dict(cfg), {"world_size": info.world_size, "device": str(device)})
    train_set, val_set = _datasets(cfg, info)

    torch.manual_seed(t.seed)
    model = build_geotransformer(cfg.model).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay)
    step, epoch, batch_in_epoch, best_rr = 0, 0, 0, -1.0
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        step, epoch, batch_in_epoch = ckpt["step"], ckpt["epoch"], ckpt["batch_in_epoch"]
        best_rr = ckpt.get("best_rr", -1.0)
        torch.set_rng_state(ckpt["torch_rng"][info.rank % len(ckpt["torch_rng"])])
        logger.info("resumed %s at epoch %d, step %d", last, epoch, step)
    elif t.init_from:
        _init_weights(model, Path(t.init_from))
    ddp = model
    if info.world_size > 1:
        ddp = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    scaler = torch.amp.GradScaler("cuda", enabled=cfg.optim.amp and device.type == "cuda")

    per_step = cfg.data.batch_size * info.world_size
    steps_per_epoch = len(train_set) // per_step
    if t.max_steps_per_epoch is not None:
        steps_per_epoch = min(steps_per_epoch, t.max_steps_per_epoch)
    if steps_per_epoch == 0:
        raise CorruptFileError(
            Path(cfg.data.root),
            f"{len(train_set)} training pairs cannot fill one step of {per_step}",
        )
    total = steps_per_epoch * t.epochs
    log = MetricsLog(out, resume_step=step if ckpt is not None else None) if info.is_main else None

    def save(path: Path, **extra: Any) -> None:
        states = [torch.get_rng_state()]
        save_checkpoint(
            path,
            "geotransformer-train",
            model.state_dict(),
            overwrite=True,
            optimizer=opt.state_dict(),
            step=step,
            epoch=epoch,
            batch_in_epoch=batch_in_epoch,
            best_rr=best_rr,
            torch_rng=states,
            config=to_dict(cfg),
            model_config=dataclasses.asdict(cfg.model),
            inference=dataclasses.asdict(cfg.inference),
            **extra,
        )

    val = {}
    bar = tqdm(total=total, initial=step, desc="train", unit="step", disable=not info.is_main)
    while epoch < t.epochs:
        order = np.random.default_rng([t.seed, epoch]).permutation(len(train_set))
        model.train()
        while batch_in_epoch < steps_per_epoch:
            start = time.perf_counter()
            chunk = order[batch_in_epoch * per_step : (batch_in_epoch + 1) * per_step]
            mine = chunk[info.rank * cfg.data.batch_size : (info.rank + 1) * cfg.data.batch_size]
            items, gens = [], []
            for idx in mine.tolist():
                rng, gen = _pair_generator(t.seed, epoch, idx)
                src, ref, tr = train_set[idx][:3]
                lim = cfg.data.point_limit
                if lim is not None:  # GeoTransformer's training point limit
                    ref = ref[rng.permutation(len(ref))[:lim]] if len(ref) > lim else ref
                    src = src[rng.permutation(len(src))[:lim]] if len(src) > lim else src
                items.append(augment_pair(src, ref, tr, cfg.data.augmentation, rng))
                gens.append(gen)
            batch = _collate(cfg, items, device)
            for g in opt.param_groups:
                g["lr"] = cfg.optim.lr * lr_factor(step, epoch, total, cfg.optim)
            targets, sampled = build_targets(
                batch.pyramid,
                len(items),
                batch.transforms,
                cfg.model.num_points_in_patch,
                cfg.loss,
                gens,
            )
            with torch.autocast(device.type, enabled=cfg.optim.amp and device.type == "cuda"):
                out_b = ddp(batch.pyramid, batch.feats, len(items), node_correspondences=sampled)
                losses = registration_loss(out_b, batch.transforms, targets, cfg.loss)
            opt.zero_grad(set_to_none=True)
            scaler.scale(losses["loss"]).backward()
            if cfg.optim.grad_clip > 0:
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
            scaler.step(opt)
            scaler.update()
            step += 1
            batch_in_epoch += 1
            bar.update(1)
            if info.is_main:
                vals = {k: float(v.detach()) for k, v in losses.items()}
                vals["lr"] = opt.param_groups[0]["lr"]
                vals["step_time_s"] = time.perf_counter() - start
                bar.set_postfix(loss=f"{vals['loss']:.3f}", epoch=epoch)
                if step % t.log_every == 0:
                    log.log(step, epoch, "train", vals)
                if step % t.checkpoint_every == 0:
                    save(last)
        epoch += 1
        batch_in_epoch = 0
        val = _validate(model, val_set, cfg, info, device)
        if info.is_main:
            log.log(step, epoch, "val", val)
            logger.info(
                "epoch %d: val RR %.3f IR %.3f loss %.3f",
                epoch,
                val["registration_recall"],
                val["inlier_ratio"],
                val["loss"],
            )
            improved = val["registration_recall"] > best_rr
            best_rr = max(best_rr, val["registration_recall"])
            save(last)
            if improved:
                save(best, val=val)
        barrier(info)
    bar.close()
    if info.is_main:
        log.write_csv()
        log.close()
    return val


def epoch_history(rows: list[dict[str, Any]]) -> dict[str, list[float]] | None:
    """Per-epoch curves from the rows of ``metrics.jsonl``: the mean training loss of each epoch
    beside that epoch's validation loss, registration recall and inlier ratio (epochs without
    validation are left out). ``None`` while the log holds no training or no validation row."""
    train = [r for r in rows if r["split"] == "train"]
    valr = [r for r in rows if r["split"] == "val"]
    if not train or not valr:
        return None
    epochs = sorted({r["epoch"] for r in train})
    means = [float(np.mean([r["loss"] for r in train if r["epoch"] == e])) for e in epochs]
    by_epoch = {r["epoch"]: r for r in valr}  # a validation row carries the epoch just ended
    keep = [e for e in epochs if e + 1 in by_epoch]
    return {
        "epoch": [e + 1 for e in keep],
        "train_loss": [means[epochs.index(e)] for e in keep],
        "val_loss": [by_epoch[e + 1]["loss"] for e in keep],
        "val_registration_recall": [by_epoch[e + 1]["registration_recall"] for e in keep],
        "val_inlier_ratio": [by_epoch[e + 1]["inlier_ratio"] for e in keep],
    }


def training_history(out_dir: str | os.PathLike[str]) -> dict[str, list[float]] | None:
    """:func:`epoch_history` of the run in ``out_dir`` (its ``metrics.jsonl``; ``None`` when
    absent): what ``training_curves.png`` plots."""
    path = Path(out_dir) / "metrics.jsonl"
    if not path.exists():
        return None
    return epoch_history([json.loads(ln) for ln in path.read_text().splitlines() if ln])
