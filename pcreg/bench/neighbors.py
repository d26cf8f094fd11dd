"""Neighbor-search benchmark on CPU tensors: the backends, 16-NN and radius-with-cap, at 20k and
100k points, with SciPy's cKDTree (an outside reference users would pick) measured in the same
run.

KeOps is left out unless asked for (``backends=[..., "keops"]``): it is the GPU backend
(:func:`~pcreg.ops.neighbors.resolve_backend` never picks it for CPU tensors), and on a CPU it
compiles C++ kernels and brute-forces every distance, minutes at 100k points on two cores,
after a "CUDA libraries not found" warning on a machine without CUDA."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from pcreg.bench.report import machine_description, median_time
from pcreg.ops.neighbors import available_backends, knn, radius_search, resolve_backend

__all__ = [
    "BRUTE_FORCE",
    "NeighborTiming",
    "benchmark_neighbors",
    "cpu_backends",
    "format_neighbor_table",
    "load_benchmark_cloud",
]

logger = logging.getLogger(__name__)

KITTI_SCAN = Path("kitti00_scancontext/000094.bin")
BRUTE_FORCE = ("torch", "keops")  # O(M N) distance evaluations: ~13 s per 100k self-search


def cpu_backends() -> list[str]:
    """The backends timed by default: every installed one except ``reference`` (O(N^2)
    memory) and ``keops`` (see the module docstring), e.g. ``['torch', 'open3d']``."""
    return [b for b in available_backends() if b not in ("reference", "keops")]


@dataclass
class NeighborTiming:
    points: int
    query: str  # "knn16" or "radius"
    method: str
    median_s: float
    runs: int


def load_benchmark_cloud(shared_data: Path | None, seed: int = 0) -> tuple[np.ndarray, str]:
    """A real KITTI HDL-64 scan when ``shared_data`` holds it, else a synthetic street-like cloud
    (ground plane plus walls) of the same size. Returns ``(points (N, 3) float32, description)``."""
    if shared_data is not None and (shared_data / KITTI_SCAN).exists():
        from pcreg.io import read_points

        scan = read_points(shared_data / KITTI_SCAN).astype(np.float32)  # float64 -> float32
        return scan, f"real KITTI scan 00/000094 ({KITTI_SCAN})"
    rng = np.random.default_rng(seed)
    n = 121_000
    pts = rng.uniform(-40, 40, size=(n, 3)).astype(np.float32)
    pts[: n // 2, 2] = -1.73 + rng.normal(0, 0.02, n // 2)  # ground seen from 1.73 m
    pts[n // 2 :, 1] = np.where(pts[n // 2 :, 1] > 0, 8.0, -8.0)  # two building facades
    return pts, "synthetic street (shared data not found)"


def _ckdtree_methods(points: np.ndarray, k: int, radius: float, cap: int):
    from scipy.spatial import cKDTree

    def knn_fn():
        tree = cKDTree(points)
        return tree.query(points, k=k, workers=-1)

    def radius_fn():
        tree = cKDTree(points)
        return tree.query(points, k=cap, distance_upper_bound=radius, workers=-1)

    return knn_fn, radius_fn


def benchmark_neighbors(
    cloud: np.ndarray,
    sizes: tuple[int, ...] = (20_000, 100_000),
    *,
    k: int = 16,
    radius: float = 0.5,
    cap: int = 32,
    runs: int = 5,
    backends: list[str] | None = None,
    brute_force_max: int | None = None,
    seed: int = 0,
) -> list[NeighborTiming]:
    """Time self-search (query = support, as in the KPConv pyramid) on random subsets of
    ``cloud (N, 3)`` (metres) of ``sizes`` points: ``knn(k)`` and ``radius_search(radius,
    max_neighbors=cap)`` for ``backends`` (default :func:`cpu_backends`), plus cKDTree, each
    the median of ``runs`` calls after one warm-up call (KeOps compiles its kernels in the
    warm-up), in seconds. ``brute_force_max``: the :data:`BRUTE_FORCE` backends only up to
    that many points (``pcreg benchmark --quick``); their larger rows are left out."""
    rng = np.random.default_rng(seed)
    backends = backends or cpu_backends()
    results: list[NeighborTiming] = []
    jobs = [
        (n, m)
        for n in sizes
        for m in [*backends, "scipy-ckdtree"]
        if brute_force_max is None or m not in BRUTE_FORCE or min(n, len(cloud)) <= brute_force_max
    ]
    for n, method in tqdm(jobs, desc="neighbor benchmark", unit="case"):
        pts = cloud[rng.choice(len(cloud), size=min(n, len(cloud)), replace=False)]
        if method == "scipy-ckdtree":
            knn_fn, radius_fn = _ckdtree_methods(pts, k, radius, cap)
        else:
            tensor = torch.from_numpy(np.ascontiguousarray(pts))

            def knn_fn(t=tensor, b=method):
                return knn(t, t, k, backend=b)

            def radius_fn(t=tensor, b=method):
                return radius_search(t, t, radius, max_neighbors=cap, backend=b)

        for query, fn in (("knn16" if k == 16 else f"knn{k}", knn_fn), ("radius", radius_fn)):
            med, _ = median_time(fn, runs=runs)
            results.append(NeighborTiming(len(pts), query, method, med, runs))
            logger.info("%d points %s %s: %.4f s", len(pts), query, method, med)
    return results


def format_neighbor_table(
    results: list[NeighborTiming], *, source: str, radius: float, cap: int, command: str
) -> str:
    """Markdown: one row per (size, query), one column per method (``-`` where a method was
    not timed at that size), the ``auto`` choice and its ratio to the fastest method of the
    same row."""
    methods = list(dict.fromkeys(r.method for r in results))
    auto = resolve_backend("auto", "cpu")
    lines = [
        "## Neighbor search (CPU)",
        "",
        f"Machine: {machine_description()}.",
        f"Data: {source}; random subsets, query = support (self-search as in the KPConv pyramid). "
        f"`radius` = radius search with r = {radius} m, capped at the {cap} nearest. "
        f"Median of {results[0].runs if results else 0} runs after a warm-up call, seconds. "
        f"`auto` on CPU resolves to `{auto}`."
        + ("" if "keops" in methods else " KeOps (the GPU backend) is not timed on CPU.")
        + (" `-`: not timed at that size (brute force in `--quick`)." if _gaps(results) else ""),
        "",
        f"Command: `{command}`",
        "",
        "| points | query | " + " | ".join(methods) + " | auto / fastest |",
        "|---:|---|" + "---:|" * len(methods) + "---:|",
    ]
    rows = list(dict.fromkeys((r.points, r.query) for r in results))
    for points, query in rows:
        cell = {r.method: r.median_s for r in results if (r.points, r.query) == (points, query)}
        fastest = min(cell.values())
        ratio = cell.get(auto, float("nan")) / fastest
        lines.append(
            f"| {points:,} | {query} | "
            + " | ".join(
                "-"
                if m not in cell
                else f"{cell[m]:.3f}" + (" **(fastest)**" if cell[m] == fastest else "")
                for m in methods
            )
            + f" | {ratio:.2f}x |"
        )
    return "\n".join(lines)


def _gaps(results: list[NeighborTiming]) -> bool:
    """Some method was not timed at some size."""
    methods = {r.method for r in results}
    return any(
        {r.method for r in results if r.points == n} != methods for n in {r.points for r in results}
    )
