"""Run a registration method over a benchmark and score it with the published protocols.

Per pair: inlier ratio IR (fraction of output correspondences within ``inlier_radius`` under
the ground truth; 10 cm indoors), feature-matching recall FMR (IR >= 5 %), RRE, RTE and success:

* ``threedmatch``: the gt.info RMSE proxy <= 0.2 m when the official benchmark files are given
  (non-consecutive pairs only, mean of per-scene recalls), otherwise the RMSE between the source
  points moved by the estimate and by the ground truth <= 0.2 m;
* ``kitti``: RRE < 5 deg and RTE < 2 m.

RRE / RTE are averaged over successful pairs, as published.

:func:`pcreg.evaluation.run_evaluation` (a floor up) is ``pcreg evaluate``: a checkpoint over a
configured dataset through the registration pipeline, scored here.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm.auto import tqdm

from pcreg.geometry.metrics import covariance_rmse, pose_errors, transform_rmse

if TYPE_CHECKING:
    from pcreg.config import EvalDatasetConfig

__all__ = [
    "evaluate_pairs",
    "evaluation_dataset",
    "format_evaluation_markdown",
]


def _info_lookup(benchmark_dir: Path | None) -> dict:
    if benchmark_dir is None:
        return {}
    from pcreg.data.threedmatch import read_gt_info

    table = {}
    for scene in Path(benchmark_dir).iterdir():
        if (scene / "gt.info").is_file():
            for e in read_gt_info(scene / "gt.info"):
                table[(scene.name, e.i, e.j)] = e.matrix
    return table


def evaluate_pairs(
    dataset: Sequence,
    predict: Callable,
    *,
    protocol: str = "threedmatch",
    benchmark_dir: str | os.PathLike[str] | None = None,
    inlier_radius: float | None = None,
    limit: int | None = None,
    progress: bool = True,
    rank: int = 0,
    world_size: int = 1,
    predict_many: Callable[[list[tuple[np.ndarray, np.ndarray]]], list] | None = None,
    chunk: int = 8,
) -> dict:
    """Score ``predict(src, ref)`` on ``dataset`` items ``(src, ref, T, record)``: anything
    with ``transform``, ``src_corr_points``, ``ref_corr_points`` and ``time_s`` (a
    :class:`~pcreg.registration.RegistrationResult`).

    With ``predict_many`` (a list of ``(src, ref)`` pairs -> their predictions in order, such
    as a :class:`~pcreg.batch.runner.RayRunner`'s ``map``) the items are read and
    predicted ``chunk`` at a time instead, and ``predict`` is not called. Under ``torchrun``
    pass the rank / world size: rank r scores pairs r, r + W, ... and the rows are gathered on
    every rank before the summary.
    Returns ``{"pairs": [...], "scenes": [...], "overall": {...}}``."""
    if protocol not in ("threedmatch", "kitti"):
        raise ValueError(f"protocol must be 'threedmatch' or 'kitti', got {protocol!r}")
    if chunk < 1:
        raise ValueError(f"chunk must be at least 1, got {chunk}")
    radius = (
        inlier_radius if inlier_radius is not None else (0.1 if protocol == "threedmatch" else 0.6)
    )
    info = _info_lookup(Path(benchmark_dir) if benchmark_dir else None)
    n = len(dataset) if limit is None else min(limit, len(dataset))
    mine = list(range(rank, n, world_size))
    size = chunk if predict_many is not None else 1
    rows = []
    with tqdm(
        total=len(mine), desc="evaluate", unit="pair", disable=not progress or rank != 0
    ) as bar:
        for at in range(0, len(mine), size):
            items = [dataset[idx] for idx in mine[at : at + size]]
            if predict_many is not None:
                preds = predict_many([(src, ref) for src, ref, _, _ in items])
            else:
                preds = [predict(src, ref) for src, ref, _, _ in items]
            if len(preds) != len(items):
                raise RuntimeError(f"{len(preds)} predictions for {len(items)} pairs")
            rows += [
                _score(item, pred, protocol, info, radius)
                for item, pred in zip(items, preds, strict=True)
            ]
            bar.update(len(items))
    if world_size > 1:
        import torch.distributed as dist

        gathered: list = [None] * world_size
        dist.all_gather_object(gathered, rows)
        rows = [r for part in gathered for r in part]
    return _summarise(rows, protocol)


def _score(item: tuple, pred, protocol: str, info: dict, radius: float) -> dict:
    """One row of the table: ``item`` ``(src, ref, T_ref_src, record)`` and its prediction."""
    src, _, gt, rec = item
    gt_t = torch.tensor(np.asarray(gt, np.float64))  # a copy: Ray hands back read-only arrays
    est = torch.tensor(np.asarray(pred.transform, np.float64))
    moved = pred.src_corr_points @ gt[:3, :3].T + gt[:3, 3]
    ir = (
        float(np.mean(np.linalg.norm(moved - pred.ref_corr_points, axis=1) < radius))
        if len(moved)
        else 0.0
    )
    err = pose_errors(est, gt_t)
    rre, rte = err["rre_deg"], err["rte_m"]
    scene = getattr(rec, "scene", None) or f"{getattr(rec, 'seq', 0):02d}"
    i, j = (getattr(rec, "ref_id", None), getattr(rec, "src_id", None))
    counted = True
    if protocol == "kitti":
        ok = rre < 5.0 and rte < 2.0
    elif (scene, i, j) in info:
        ok = float(covariance_rmse(est, gt_t, torch.from_numpy(info[(scene, i, j)]))) <= 0.2
        counted = j > i + 1  # consecutive fragments are not part of RR
    else:
        ok = float(transform_rmse(np.asarray(src, np.float64), est, gt_t)) <= 0.2
    return {
        "scene": scene,
        "ref": i if i is not None else getattr(rec, "ref_frame", None),
        "src": j if j is not None else getattr(rec, "src_frame", None),
        "inlier_ratio": ir,
        "fmr": ir >= 0.05,
        "rre_deg": rre,
        "rte_m": rte,
        "registered": bool(ok),
        "counted_in_rr": bool(counted),
        "num_correspondences": len(moved),
        "time_s": pred.time_s,
    }


def _summarise(rows: list[dict], protocol: str) -> dict:
    by_scene = defaultdict(list)
    for r in rows:
        by_scene[r["scene"]].append(r)

    def stats(rs: list[dict]) -> dict:
        rr_rows = [r for r in rs if r["counted_in_rr"]]
        good = [r for r in rr_rows if r["registered"]]
        return {
            "pairs": len(rs),
            "rr_pairs": len(rr_rows),
            "fmr": float(np.mean([r["fmr"] for r in rs])) if rs else math.nan,
            "inlier_ratio": float(np.mean([r["inlier_ratio"] for r in rs])) if rs else math.nan,
            "registration_recall": len(good) / len(rr_rows) if rr_rows else math.nan,
            "rre_deg": float(np.mean([r["rre_deg"] for r in good])) if good else math.nan,
            "rte_m": float(np.mean([r["rte_m"] for r in good])) if good else math.nan,
            "time_s": float(np.median([r["time_s"] for r in rs])) if rs else math.nan,
        }

    scenes = [{"scene": s, **stats(rs)} for s, rs in sorted(by_scene.items())]
    overall = stats(rows)
    if protocol == "threedmatch":  # RR is the mean of per-scene recalls
        valid = [s["registration_recall"] for s in scenes if s["rr_pairs"]]
        overall["registration_recall"] = float(np.mean(valid)) if valid else math.nan
        overall["fmr"] = float(np.mean([s["fmr"] for s in scenes])) if scenes else math.nan
        overall["inlier_ratio"] = (
            float(np.mean([s["inlier_ratio"] for s in scenes])) if scenes else math.nan
        )
    return {"pairs": rows, "scenes": scenes, "overall": overall, "protocol": protocol}


def format_evaluation_markdown(result: dict) -> str:
    lines = [
        "| scene | pairs | FMR % | IR % | RR % | RRE deg | RTE cm | median time s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def row(name, s):
        return (
            f"| {name} | {s['pairs']} | {100 * s['fmr']:.1f} | {100 * s['inlier_ratio']:.1f} | "
            f"{100 * s['registration_recall']:.1f} | {s['rre_deg']:.2f} | "
            f"{100 * s['rte_m']:.1f} | {s['time_s']:.2f} |"
        )

    lines += [row(s["scene"], s) for s in result["scenes"]]
    lines.append(row("**all**", result["overall"]))
    return "\n".join(lines)


def evaluation_dataset(cfg: EvalDatasetConfig) -> tuple[Sequence, Path | None, str]:
    """The pairs ``cfg`` names, the official benchmark files (3DMatch layout, when present) and
    the protocol that scores them: ``(dataset, benchmark_dir, protocol)``."""
    from pcreg.config import ConfigError

    root = Path(cfg.root)
    if cfg.layout == "threedmatch":
        from pcreg.data.threedmatch import ThreeDMatchPairs

        benchmark = cfg.benchmark or "3DMatch"
        dataset = ThreeDMatchPairs(root, benchmark)
        bdir = cfg.benchmark_dir or root / "metadata" / "benchmarks" / benchmark
        return dataset, (Path(bdir) if Path(bdir).is_dir() else None), "threedmatch"
    if cfg.layout == "kitti":
        from pcreg.data.kitti import KittiPairs

        pairs = KittiPairs(root, cfg.benchmark or "test")
        if not pairs.records:
            raise pairs.no_pairs("dataset.benchmark={}")
        return pairs, None, "kitti"
    raise ConfigError("dataset.layout", f"must be threedmatch or kitti, got {cfg.layout!r}")
