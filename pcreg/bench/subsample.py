"""Grid-subsampling benchmark: :func:`pcreg.ops.grid_subsample` (one centroid per occupied voxel)
against Open3D's ``voxel_down_sample`` (also centroids per voxel; the tool users would pick), on
the real KITTI scan at the first voxel size of each model's pyramid, in the same run. Open3D
anchors its grid half a voxel lower than pcreg (``min - voxel / 2``), so the kept counts differ
slightly; both are reported."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from pcreg.bench.report import machine_description, median_time
from pcreg.ops.grid_subsample import grid_subsample

__all__ = ["SubsampleTiming", "benchmark_subsampling", "format_subsample_table"]

logger = logging.getLogger(__name__)


@dataclass
class SubsampleTiming:
    points: int
    voxel_m: float
    method: str  # "pcreg" | "open3d"
    median_s: float
    kept: int  # points after subsampling
    runs: int


def _open3d_fn(points: np.ndarray, voxel: float):
    import open3d as o3d

    def run():
        cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points.astype(np.float64)))
        return np.asarray(cloud.voxel_down_sample(voxel).points)

    return run


def benchmark_subsampling(
    cloud: np.ndarray,
    sizes: tuple[int, ...] = (20_000, 120_000),
    voxels: tuple[float, ...] = (0.025, 0.3),
    runs: int = 5,
    seed: int = 0,
) -> list[SubsampleTiming]:
    """Median time of each method per (size, voxel), with the number of points kept."""
    rng = np.random.default_rng(seed)
    results: list[SubsampleTiming] = []
    jobs = [(n, v) for n in sizes for v in voxels]
    for n, voxel in tqdm(jobs, desc="subsampling benchmark", unit="case"):
        pts = cloud[rng.choice(len(cloud), size=min(n, len(cloud)), replace=False)]
        tensor = torch.from_numpy(np.ascontiguousarray(pts, dtype=np.float32))
        o3d_fn = _open3d_fn(pts, voxel)
        ours_med, _ = median_time(lambda t=tensor, v=voxel: grid_subsample(t, voxel_size=v), runs)
        theirs_med, _ = median_time(o3d_fn, runs)
        kept = len(grid_subsample(tensor, voxel_size=voxel)[0])
        results.append(SubsampleTiming(len(pts), voxel, "pcreg", ours_med, kept, runs))
        results.append(SubsampleTiming(len(pts), voxel, "open3d", theirs_med, len(o3d_fn()), runs))
        logger.info("%d points @ %g m: pcreg %.4f s, open3d %.4f s", len(pts), voxel, ours_med,
                    theirs_med)  # fmt: skip
    return results


def format_subsample_table(results: list[SubsampleTiming], *, source: str, command: str) -> str:
    """Markdown: one row per (size, voxel), both methods side by side with the ratio."""
    lines = [
        "## Grid subsampling (CPU)",
        "",
        f"Machine: {machine_description()}.",
        f"Data: {source}; random subsets. Both methods keep one centroid per occupied voxel "
        "(Open3D's grid is shifted by half a voxel, hence slightly different counts). Median "
        f"of {results[0].runs if results else 0} runs after a warm-up call, seconds.",
        "",
        f"Command: `{command}`",
        "",
        "| points | voxel m | kept (pcreg, Open3D) | pcreg s | Open3D s | pcreg / Open3D |",
        "|---:|---:|---|---:|---:|---:|",
    ]
    keys = list(dict.fromkeys((r.points, r.voxel_m) for r in results))
    for points, voxel in keys:
        row = {r.method: r for r in results if (r.points, r.voxel_m) == (points, voxel)}
        ours, theirs = row["pcreg"], row["open3d"]
        lines.append(
            f"| {points:,} | {voxel:g} | {ours.kept:,}, {theirs.kept:,} | {ours.median_s:.4f} | "
            f"{theirs.median_s:.4f} | {ours.median_s / theirs.median_s:.2f}x |"
        )
    return "\n".join(lines)
