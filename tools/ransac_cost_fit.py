"""Measured against predicted time per iteration of Open3D's correspondence RANSAC, for the
cost model of ``pcreg/baselines/ransac_cost.py`` (BENCHMARKS.md, "A pair on which every RANSAC
sample passes"). Pairs rebuilt from ``../shared`` and the generated rooms: each is prepared as
``fpfh_ransac`` prepares it (FPFH at its voxel, Open3D's matching), then RANSAC runs 2,000
iterations at confidence 1 (no early stop; median of 3) beside the predicted cost from the
share of seeded samples that pass the checkers. Prints a Markdown table and a least-squares
fit of the two constants (an iteration, and a validation per correspondence).

    python tools/ransac_cost_fit.py
"""

from __future__ import annotations

import glob
import time
from pathlib import Path

import numpy as np
import open3d as o3d

from pcreg.baselines.fpfh_ransac import _prepare
from pcreg.baselines.ransac_cost import checker_pass_share, predicted_iteration_s
from pcreg.demo import _room_pair
from pcreg.io import read_points

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
REG = o3d.pipelines.registration


def measure(name: str, src: np.ndarray, ref: np.ndarray, voxel: float, keep=None) -> tuple:
    """``(matches, share, measured s, predicted s)`` of one pair; prints its row."""
    sd, sf = _prepare(src, voxel, keep)
    rd, rf = _prepare(ref, voxel)
    corres = np.asarray(REG.correspondences_from_features(sf, rf, False))
    dist = 1.5 * voxel
    share = checker_pass_share(np.asarray(sd.points), np.asarray(rd.points), corres, dist)
    checkers = [REG.CorrespondenceCheckerBasedOnEdgeLength(0.9),
                REG.CorrespondenceCheckerBasedOnDistance(dist)]  # fmt: skip
    matches = o3d.utility.Vector2iVector(corres.astype(np.int32))
    runs = []
    for _ in range(3):
        o3d.utility.random.seed(0)
        start = time.perf_counter()
        REG.registration_ransac_based_on_correspondence(
            sd, rd, matches, dist, REG.TransformationEstimationPointToPoint(False), 3, checkers,
            REG.RANSACConvergenceCriteria(2000, 1.0),
        )  # fmt: skip
        runs.append((time.perf_counter() - start) / 2000)
    each, predicted = float(np.median(runs)), predicted_iteration_s(len(corres), share)
    print(f"| {name} | {len(corres)} | {share:.3f} | {each * 1e6:.0f} | {predicted * 1e6:.0f} |",
          flush=True)  # fmt: skip
    return len(corres), share, each, predicted


def main() -> None:
    data = SHARED / "data"
    print(
        "| pair | matches | share passing | measured us | predicted us |\n|---|---:|---:|---:|---:|"
    )
    rows = []
    for k in (0, 1):
        s, r, _ = _room_pair(k)
        rows.append(measure(f"generated room pair {k}", s.astype(float), r.astype(float), 0.05))
    demo = data / "geotransformer_repo" / "demo"
    a, b = np.load(demo / "src.npy").astype(float), np.load(demo / "ref.npy").astype(float)
    rows.append(measure("3DMatch demo pair", a, b, 0.05))
    rows.append(measure("3DMatch demo source, mirrored", a, a * [-1, 1, 1], 0.05))
    mesh = data / "stanford_bunny_teaser" / "bun_zipper_res3.ply"
    v = np.asarray(o3d.io.read_triangle_mesh(str(mesh)).vertices) * 17
    rows.append(measure("bunny mesh x17, mirrored", v, v * [-1, 1, 1], 0.05))
    scans = sorted(glob.glob(str(SHARED / "train_data/stanford_bunny_range_scans/scans/*.npy")))
    x, y = np.load(scans[0]).astype(float)[:, :3], np.load(scans[1]).astype(float)[:, :3]
    size = np.ptp(x, axis=0).max()
    for metres in (1, 4):
        rows.append(measure(f"bunny range scans 0-1 at {metres} m", x * metres / size,
                            y * metres / size, 0.05))  # fmt: skip
    k = [read_points(data / f"kitti00_scancontext/0000{i}.bin")[:, :3] for i in (94, 95)]
    rows.append(measure("KITTI 00 94-95", k[0], k[1], 0.3))
    rows.append(measure("KITTI 00 94-95, 5,000 queries", k[0], k[1], 0.3, 5000))
    rows.append(measure("KITTI 00 94, mirrored, 5,000 queries", k[0], k[0] * [-1, 1, 1], 0.3, 5000))
    design = np.array([[1.0, n * s] for n, s, _, _ in rows])
    measured = np.array([e for _, _, e, _ in rows])
    fit = np.linalg.lstsq(design, measured, rcond=None)[0]
    print(f"\nleast squares: {fit[0] * 1e6:.1f} us per iteration + {fit[1] * 1e6:.2f} us per "
          "correspondence of each validation")  # fmt: skip


if __name__ == "__main__":
    main()
