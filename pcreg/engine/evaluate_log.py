"""Score any method's 3DMatch-format estimates (``.log`` files) with the published protocol.

For every scene of ``gt_dir`` (a folder ``<scene>/`` holding ``gt.log`` and ``gt.info``) the
estimates are read from ``<est_dir>/<scene>/est.log`` or ``<est_dir>/<scene>.log``. A pair is
registered when the gt.info RMSE proxy is <= 0.2 m; only non-consecutive pairs (``j > i + 1``)
count; a pair without an estimate counts as a failure; every gt.log entry, the first of each
scene included, is scored. RR is the mean of per-scene recalls (DESIGN §7); RRE / RTE are
averaged over registered pairs.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from pcreg.data.threedmatch import read_gt_info, read_gt_log
from pcreg.errors import InputError, MissingFileError
from pcreg.geometry.metrics import (
    covariance_rmse,
    relative_rotation_error_deg,
    relative_translation_error,
)
from pcreg.geometry.transforms import orthonormalize_rotation

__all__ = ["SceneScore", "format_scores_markdown", "score_log_dirs"]


@dataclass
class SceneScore:
    scene: str
    pairs: int  # non-consecutive pairs scored
    registered: int
    missing: int  # pairs without an estimate (failures)
    recall: float
    rre_deg: float  # mean over registered pairs (nan when none)
    rte_m: float


def _est_path(est_dir: Path, scene: str) -> Path | None:
    for p in (est_dir / scene / "est.log", est_dir / f"{scene}.log"):
        if p.is_file():
            return p
    return None


def score_log_dirs(
    gt_dir: str | os.PathLike[str], est_dir: str | os.PathLike[str], rmse_threshold: float = 0.2
) -> dict:
    """Returns ``{"scenes": [SceneScore...], "overall": {...}, "pairs": [per-pair dicts]}``."""
    gt_dir, est_dir = Path(gt_dir), Path(est_dir)
    if not gt_dir.is_dir():
        raise MissingFileError(gt_dir, "ground-truth directory not found")
    if not est_dir.is_dir():
        raise MissingFileError(est_dir, "estimate directory not found")
    scenes = sorted(p.name for p in gt_dir.iterdir() if (p / "gt.log").is_file())
    if not scenes:
        raise InputError(gt_dir, "no <scene>/gt.log found")
    results, pairs = [], []
    for scene in scenes:
        gt = read_gt_log(gt_dir / scene / "gt.log")
        info = {(e.i, e.j): e.matrix for e in read_gt_info(gt_dir / scene / "gt.info")}
        path = _est_path(est_dir, scene)
        est = {(e.i, e.j): e.matrix for e in read_gt_log(path)} if path else {}
        n = ok = missing = 0
        rre, rte = [], []
        for e in gt:
            if e.j <= e.i + 1:
                continue  # consecutive fragments are excluded from RR
            n += 1
            if (e.i, e.j) not in info:
                raise InputError(gt_dir / scene / "gt.info", f"no entry for pair {e.i} {e.j}")
            t_est = est.get((e.i, e.j))
            if t_est is None:
                missing += 1
                pairs.append(
                    {"scene": scene, "i": e.i, "j": e.j, "registered": False, "rmse": None}
                )
                continue
            t_gt = torch.from_numpy(e.matrix)
            t_gt[:3, :3] = orthonormalize_rotation(t_gt[:3, :3])
            te = torch.from_numpy(np.asarray(t_est, np.float64))
            rmse = float(covariance_rmse(te, t_gt, torch.from_numpy(info[(e.i, e.j)])))
            good = rmse <= rmse_threshold
            ok += good
            r_deg = float(relative_rotation_error_deg(te, t_gt))
            t_m = float(relative_translation_error(te, t_gt))
            if good:
                rre.append(r_deg)
                rte.append(t_m)
            pairs.append(
                {
                    "scene": scene,
                    "i": e.i,
                    "j": e.j,
                    "registered": good,
                    "rmse": rmse,
                    "rre_deg": r_deg,
                    "rte_m": t_m,
                }
            )
        results.append(
            SceneScore(
                scene,
                n,
                ok,
                missing,
                ok / n if n else math.nan,
                float(np.mean(rre)) if rre else math.nan,
                float(np.mean(rte)) if rte else math.nan,
            )
        )
    valid = [s for s in results if s.pairs]
    all_rre = [p["rre_deg"] for p in pairs if p["registered"]]
    all_rte = [p["rte_m"] for p in pairs if p["registered"]]
    overall = {
        "registration_recall": float(np.mean([s.recall for s in valid])) if valid else math.nan,
        "pair_recall": sum(s.registered for s in valid) / max(1, sum(s.pairs for s in valid)),
        "pairs": sum(s.pairs for s in valid),
        "registered": sum(s.registered for s in valid),
        "missing": sum(s.missing for s in valid),
        "rre_deg": float(np.mean(all_rre)) if all_rre else math.nan,
        "rte_m": float(np.mean(all_rte)) if all_rte else math.nan,
    }
    return {"scenes": [asdict(s) for s in results], "overall": overall, "pairs": pairs}


def format_scores_markdown(scores: dict) -> str:
    lines = [
        "| scene | pairs | registered | missing | RR % | RRE deg | RTE cm |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in scores["scenes"]:
        lines.append(
            f"| {s['scene']} | {s['pairs']} | {s['registered']} | {s['missing']} | "
            f"{100 * s['recall']:.1f} | {s['rre_deg']:.2f} | {100 * s['rte_m']:.1f} |"
        )
    o = scores["overall"]
    lines.append(
        f"| **all (mean of scenes)** | {o['pairs']} | {o['registered']} | {o['missing']} | "
        f"**{100 * o['registration_recall']:.1f}** | {o['rre_deg']:.2f} | {100 * o['rte_m']:.1f} |"
    )
    return "\n".join(lines)
