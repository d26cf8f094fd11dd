"""Forward time and peak memory of the registration network on the real 3DMatch demo pair
(CPU), beside Open3D's FPFH + RANSAC on the same pair as the in-run reference.

Each configuration is measured in a fresh subprocess so its peak resident memory (``ru_maxrss``)
is its own; the reported increase is that peak minus the resident size just before the first
forward call (model built, pyramid ready).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["benchmark_model", "format_model_table"]

CONFIGS = {
    "published 3DMatch (9.8 M params)": {},
    "reduced widths (tests' debug size)": {
        "init_dim": 16,
        "group_norm": 8,
        "hidden_dim": 64,
        "coarse_dim": 64,
        "output_dim": 64,
    },
}


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _worker(demo_dir: str, overrides: dict, runs: int) -> dict:
    import torch

    from pcreg.bench.report import median_time
    from pcreg.data.collate import collate_pairs
    from pcreg.layers import count_parameters
    from pcreg.models.geotransformer import build_geotransformer, threedmatch_config

    demo = Path(demo_dir)
    src = torch.from_numpy(np.load(demo / "src.npy")).float()
    ref = torch.from_numpy(np.load(demo / "ref.npy")).float()
    cfg = threedmatch_config(**overrides)
    torch.manual_seed(0)
    model = build_geotransformer(cfg).eval()

    def prep():
        return collate_pairs([src], [ref], cfg)

    batch = prep()
    prep_s, _ = median_time(prep, runs=runs, warmup=0)
    before = _rss_mib()
    with torch.no_grad():
        fwd_s, times = median_time(
            lambda: model(batch.pyramid, batch.feats, 1), runs=runs, warmup=1
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "parameters": count_parameters(model),
        "points": [int(x) for x in batch.pyramid.lengths[0].tolist()],
        "preprocess_s": prep_s,
        "forward_s": fwd_s,
        "forward_runs": times,
        "rss_before_mib": before,
        "peak_rss_mib": peak,
        "threads": torch.get_num_threads(),
    }


def benchmark_model(shared_data: Path, runs: int = 3) -> dict:
    """Measure every configuration of ``CONFIGS`` (subprocesses) and the FPFH + RANSAC
    reference (5 cm voxels, no ICP) on ``shared_data/geotransformer_repo/demo``."""
    from pcreg.baselines.fpfh_ransac import fpfh_ransac
    from pcreg.bench.report import median_time

    demo = shared_data / "geotransformer_repo" / "demo"
    results = {}
    for name, overrides in CONFIGS.items():
        code = (
            "import json, sys; from pcreg.bench.model import _worker; "
            # the worker's stdout is the channel back to this process
            f"sys.stdout.write(json.dumps(_worker({str(demo)!r}, {overrides!r}, {runs})))"
        )
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        results[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    src, ref = np.load(demo / "src.npy"), np.load(demo / "ref.npy")
    start = time.perf_counter()
    ref_s, _ = median_time(lambda: fpfh_ransac(src, ref, 0.05), runs=runs, warmup=0)
    results["reference"] = {
        "name": "Open3D FPFH + RANSAC (5 cm voxels, no ICP)",
        "time_s": ref_s,
        "wall_s": time.perf_counter() - start,
    }
    return results


def format_model_table(results: dict, command: str) -> str:
    from pcreg.bench.report import machine_description

    ref = results["reference"]
    lines = [
        "## Registration network forward pass (CPU)",
        "",
        f"Machine: {machine_description()}.",
        "Data: the real 3DMatch demo pair (`geotransformer_repo/demo`, redkitchen 0<-6), "
        "voxelised at 2.5 cm; random weights (the time does not depend on their values). "
        "Forward = backbone, transformer, matching, Sinkhorn and LGR, `torch.no_grad()`; "
        f"median of the timed runs after one warm-up. Reference in the same run: {ref['name']}, "
        f"{ref['time_s']:.2f} s.",
        "",
        f"Command: `{command}`",
        "",
        "| configuration | parameters | points (ref, src) | preprocess s | forward s | "
        "forward / reference | peak RSS MiB | RSS increase in forward MiB |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        if name == "reference":
            continue
        lines.append(
            f"| {name} | {r['parameters']:,} | {r['points'][0]:,}, {r['points'][1]:,} | "
            f"{r['preprocess_s']:.2f} | {r['forward_s']:.2f} | "
            f"{r['forward_s'] / ref['time_s']:.2f}x | {r['peak_rss_mib']:.0f} | "
            f"{r['peak_rss_mib'] - r['rss_before_mib']:.0f} |"
        )
    return "\n".join(lines)
