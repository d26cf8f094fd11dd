"""Registration success of the shipped models against Open3D FPFH + RANSAC, on real scans with
random initial motions and on synthetic validation pairs (the weights issue's protocol).

Success: indoors the 3DMatch registration-recall test, RMSE <= 0.2 m between the source moved
by the estimate and by the truth; outdoors RRE < 2 deg and RTE < 0.3 m (the KITTI protocol of
GeoTransformer / PREDATOR). Cases:

* ``3DMatch 0<-6``, ``3DMatch 0<-5`` (redkitchen, ``../shared/data``): the source first moved by
  a uniform random rotation and a translation up to 1 m (uniform in the ball).
* ``KITTI 95<-94``, ``KITTI 199<-198``: the source first rotated about the vertical axis by any
  angle and shifted horizontally up to 10 m (uniform in the disk).
* synthetic validation pairs (never trained on), indoor by overlap bin and outdoor, each with a
  random motion of the same kind.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from pcreg.geometry import pose_errors, random_transform

__all__ = [
    "Case",
    "Outcome",
    "format_registration_table",
    "is_success",
    "real_cases",
    "run_cases",
    "synthetic_cases",
]

logger = logging.getLogger(__name__)

#: a method: (src (N, 3), ref (M, 3), setting) -> T_ref_src (4, 4), or None: not applicable,
#: or (T_ref_src, seconds) when the method knows its time better than the wall clock (a
#: refinement reusing an estimate already computed for the same case)
Method = Callable[[np.ndarray, np.ndarray, str], "np.ndarray | tuple[np.ndarray, float] | None"]


@dataclass
class Case:
    """One registration problem: ``gt`` is ``T_ref_src`` for the (moved) ``src``."""

    group: str
    setting: str  # "indoor" | "outdoor"
    src: np.ndarray
    ref: np.ndarray
    gt: np.ndarray


@dataclass
class Outcome:
    group: str
    method: str
    success: bool
    rre_deg: float
    rte_m: float
    rmse_m: float
    time_s: float


def _motion(setting: str, g: torch.Generator) -> np.ndarray:
    if setting == "indoor":
        return random_transform(g, max_translation=1.0, dtype=torch.float64).numpy()
    yaw = float(torch.rand((), generator=g, dtype=torch.float64)) * 2 * np.pi
    radius = 10.0 * float(torch.rand((), generator=g, dtype=torch.float64)) ** 0.5
    heading = float(torch.rand((), generator=g, dtype=torch.float64)) * 2 * np.pi
    m = np.eye(4)
    c, s = np.cos(yaw), np.sin(yaw)
    m[:2, :2] = [[c, -s], [s, c]]
    m[:2, 3] = radius * np.cos(heading), radius * np.sin(heading)
    return m


def _moved(group, setting, src, ref, gt, g) -> Case:
    m = _motion(setting, g)
    moved = (src.astype(np.float64) @ m[:3, :3].T + m[:3, 3]).astype(np.float32)
    return Case(group, setting, moved, ref, gt @ np.linalg.inv(m))


def real_cases(shared_data: Path, draws: int = 10, seed: int = 0) -> list[Case]:
    """The four real pairs of ``../shared/data``, each under ``draws`` random initial motions."""
    from pcreg.bench.real_pairs import real_pairs
    from pcreg.io import read_points

    g = torch.Generator().manual_seed(seed)
    cases = []
    for p in real_pairs(shared_data):
        # float32 as the methods always had it (read_points gives float64)
        src, ref = read_points(p.src).astype(np.float32), read_points(p.ref).astype(np.float32)
        for _ in range(draws):
            cases.append(_moved(p.name, p.setting, src, ref, np.asarray(p.gt), g))
    return cases


def synthetic_cases(
    root: Path, setting: str, split: str = "val", limit: int = 40, seed: int = 0
) -> list[Case]:
    """Pairs of a generated dataset (``pcreg.data.synthetic`` writer layout: 3DMatch layout
    indoors, KITTI layout outdoors), binned by overlap indoors (``> 30%`` and ``10-30%``), at most
    ``limit`` per bin, each under a random motion."""
    from pcreg.data.kitti import KittiPairs
    from pcreg.data.threedmatch import ThreeDMatchPairs

    g = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    bins: dict[str, list[int]] = {}
    if setting == "indoor":  # 3DMatch layout, binned by overlap
        pairs = ThreeDMatchPairs(root, split)
        for i, r in enumerate(pairs.records):
            name = "synthetic indoor, overlap > 30%" if r.overlap > 0.3 else (
                "synthetic indoor, overlap 10-30%")  # fmt: skip
            bins.setdefault(name, []).append(i)
    else:  # KITTI layout
        pairs = KittiPairs(root, split)
        bins["synthetic outdoor"] = list(range(len(pairs)))
    cases = []
    for name, idx in sorted(bins.items()):
        chosen = rng.permutation(idx)[:limit]
        for i in sorted(chosen.tolist()):
            src, ref, gt, _ = pairs[i]
            cases.append(_moved(name, setting, src, ref, gt, g))
    return cases


def is_success(case: Case, est: np.ndarray) -> tuple[bool, float, float, float]:
    """``(success, RRE deg, RTE m, RMSE m)`` under the case's criterion."""
    err = pose_errors(np.asarray(est, np.float64), case.gt, case.src)
    rre, rte, rmse = err["rre_deg"], err["rte_m"], err["rmse_m"]
    ok = rmse <= 0.2 if case.setting == "indoor" else (rre < 2.0 and rte < 0.3)
    return ok, rre, rte, rmse


def run_cases(cases: list[Case], methods: dict[str, Method]) -> list[Outcome]:
    """Every method on every case (timed, single-threaded order); progress on stderr."""
    out = []
    for case in tqdm(cases, desc="registration benchmark", unit="case"):
        for name, method in methods.items():
            start = time.perf_counter()
            est = method(case.src, case.ref, case.setting)
            if est is None:
                continue
            elapsed = time.perf_counter() - start
            if isinstance(est, tuple):
                est, elapsed = est
            ok, rre, rte, rmse = is_success(case, est)
            out.append(Outcome(case.group, name, ok, rre, rte, rmse, elapsed))
    return out


def format_registration_table(outcomes: list[Outcome], command: str, note: str = "") -> str:
    """Markdown: success rate and median time per case group (rows) and method (columns)."""
    groups = list(dict.fromkeys(o.group for o in outcomes))
    methods = list(dict.fromkeys(o.method for o in outcomes))
    head = "| case | n | " + " | ".join(f"{m}: success / median s" for m in methods) + " |"
    lines = [head, "|" + "---|" * (2 + len(methods))]
    for grp in groups:
        cells = []
        n = 0
        for m in methods:
            rows = [o for o in outcomes if o.group == grp and o.method == m]
            if not rows:
                cells.append("n/a")
                continue
            n = len(rows)
            wins = sum(o.success for o in rows)
            med = statistics.median(o.time_s for o in rows)
            cells.append(f"{100 * wins / n:.0f}% ({wins}/{n}) / {med:.2f}")
        lines.append(f"| {grp} | {n} | " + " | ".join(cells) + " |")
    from pcreg.bench.report import machine_description

    head = (
        "## Registration success: pcreg models vs FPFH + RANSAC + ICP\n\n"
        "Success: indoor RMSE <= 0.2 m (3DMatch registration recall), outdoor RRE < 2 deg and "
        "RTE < 0.3 m. Real pairs: the source first moved by a random motion (indoor: uniform "
        "rotation, translation <= 1 m; outdoor: any yaw, horizontal shift <= 10 m). Synthetic: "
        "validation pairs (never trained on) under the same kind of motion. FPFH + RANSAC at "
        '5 cm / 0.3 m voxels with point-to-plane ICP at the same voxel. "n/a": no model for '
        "that setting in the run.\n\n"
    )
    text = "\n".join(lines)
    footer = f"\n\nMeasured with `{command}` on {machine_description()}."
    return head + text + footer + (f"\n{note}" if note else "")


def default_methods(models: dict[str, str], icp: bool = True) -> dict[str, Method]:
    """The learned models (no ICP, and + ICP when ``icp``) and FPFH + RANSAC + ICP.
    ``models`` maps a setting to a model name / path; a setting without one is "n/a"."""
    from pcreg.api import register_points
    from pcreg.baselines import icp_refine

    last: dict[str, object] = {}  # the network's result on the latest case

    def learned(src, ref, setting):
        if setting not in models:
            return None
        res = register_points(src, ref, models[setting], method="geotransformer", icp=False)
        last.update(key=(id(src), id(ref)), result=res)
        return res.transform

    def learned_icp(src, ref, setting):
        """ICP from the network's estimate of the same case (computed once, its time
        counted), as ``register(..., icp=True)`` does."""
        if setting not in models:
            return None
        res = last.get("result")
        if last.get("key") != (id(src), id(ref)):
            res = register_points(src, ref, models[setting], method="geotransformer", icp=False)
        start = time.perf_counter()
        refined = icp_refine(src, ref, res.transform, res.voxel_size)
        return refined.transform, res.timings["total"] + time.perf_counter() - start

    def classical(src, ref, setting):
        return register_points(src, ref, setting, method="fpfh-ransac", icp=True).transform

    methods: dict[str, Method] = {"pcreg": learned}
    if icp:
        methods["pcreg + ICP"] = learned_icp
    methods["FPFH+RANSAC + ICP"] = classical
    return methods
