"""``pcreg demo``: register a real scan pair end to end and write the transform and a picture.

With ``../shared/data`` present it uses the real 3DMatch pair redkitchen 0 <- 6 (the pair
GeoTransformer ships as its demo) and scores the result against the official ground truth;
otherwise it generates a small indoor scene pair with a known motion. Until the learned
model ships, the registration is Open3D's FPFH + RANSAC + ICP (:mod:`pcreg.baselines`).
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import numpy as np
import torch

from pcreg._fs import atomic_output, check_writable
from pcreg.baselines import fpfh_ransac
from pcreg.geometry import (
    inlier_ratio,
    random_transform,
    relative_rotation_error_deg,
    relative_translation_error,
    transform_rmse,
)
from pcreg.io import read_points, read_transform, write_transform

__all__ = ["demo_pair", "run_demo"]

logger = logging.getLogger(__name__)

DEMO_PAIR = Path("geotransformer_repo/demo")
OUTPUTS = ("transform.txt", "result.json", "alignment.png")


def _room_pair(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A 4 x 3 x 2.5 m room (floor, walls, two boxes) sampled at ~2.5 cm, seen as two
    overlapping crops; the source crop is moved by a random rigid motion."""
    rng = np.random.default_rng(seed)

    def plane(origin, u, v, n):
        a, b = rng.random((2, n, 1))
        return np.asarray(origin) + a * np.asarray(u) + b * np.asarray(v)

    def box(lo, size, n):
        lo, (sx, sy, sz) = np.asarray(lo, float), size
        faces = [
            plane(lo, (sx, 0, 0), (0, sy, 0), n),
            plane(lo + np.array([0, 0, sz]), (sx, 0, 0), (0, sy, 0), n),
            plane(lo, (sx, 0, 0), (0, 0, sz), n),
            plane(lo + np.array([0, sy, 0]), (sx, 0, 0), (0, 0, sz), n),
            plane(lo, (0, sy, 0), (0, 0, sz), n),
            plane(lo + np.array([sx, 0, 0]), (0, sy, 0), (0, 0, sz), n),
        ]
        return np.vstack(faces)

    def cylinder(center, radius, height, n):
        angle, z = rng.random(n) * 2 * np.pi, rng.random(n) * height
        return np.stack(
            [center[0] + radius * np.cos(angle), center[1] + radius * np.sin(angle), z], axis=1
        )

    scene = np.vstack(
        [
            plane((0, 0, 0), (4, 0, 0), (0, 3, 0), 20000),
            plane((0, 0, 0), (4, 0, 0), (0, 0, 2.5), 12000),
            plane((0, 0, 0), (0, 3, 0), (0, 0, 2.5), 9000),
            plane((4, 0, 0), (0, 3, 0), (0, 0, 2.5), 9000),
            box((0.5, 1.8, 0), (1.2, 0.6, 0.8), 1500),
            box((2.6, 0.4, 0), (0.5, 0.5, 1.5), 1500),
            box((1.8, 1.2, 0.75), (0.4, 0.3, 0.3), 600),
            box((3.3, 2.1, 0), (0.6, 0.9, 0.45), 1200),
            box((0.1, 0.2, 1.1), (0.3, 1.4, 0.05), 900),  # a shelf on the wall
            box((1.3, 0.05, 1.4), (1.0, 0.05, 0.7), 700),  # a picture frame
            cylinder((2.2, 2.2), 0.2, 0.9, 2500),
            cylinder((3.6, 0.5), 0.12, 1.8, 2000),
        ]
    )
    scene += rng.normal(0, 0.003, scene.shape)  # depth-sensor-like noise
    ref = scene[scene[:, 0] < 2.8]
    src_world = scene[scene[:, 0] > 1.2]
    motion = random_transform(
        torch.Generator().manual_seed(seed), max_translation=1.0, dtype=torch.float64
    ).numpy()
    src = src_world @ motion[:3, :3].T + motion[:3, 3]
    gt = np.linalg.inv(motion)  # maps the moved source back into the reference frame
    return src.astype(np.float32), ref.astype(np.float32), gt


def demo_pair(shared_data: Path | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """``(src (N, 3), ref (M, 3), T_ref_src (4, 4), description)`` for the demo."""
    if shared_data is not None and (shared_data / DEMO_PAIR / "src.npy").exists():
        folder = shared_data / DEMO_PAIR
        return (
            read_points(folder / "src.npy"),
            read_points(folder / "ref.npy"),
            read_transform(folder / "gt.npy"),
            "real 3DMatch pair 7-scenes-redkitchen cloud_bin_0 <- cloud_bin_6",
        )
    src, ref, gt = _room_pair()
    return src, ref, gt, "generated room pair (shared data not found)"


def run_demo(
    out_dir: str | os.PathLike[str],
    *,
    shared_data: Path | None = None,
    force: bool = False,
    voxel_size: float = 0.05,
) -> str:
    """Register the demo pair, write ``transform.txt``, ``result.json`` and ``alignment.png``
    into ``out_dir``, and return a human-readable summary."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in OUTPUTS:  # fail before any work rather than after it
        check_writable(out / name, overwrite=force)
    src, ref, gt, description = demo_pair(shared_data)
    logger.info("demo pair: %s (%d source, %d reference points)", description, len(src), len(ref))
    start = time.perf_counter()
    result = fpfh_ransac(src, ref, voxel_size, icp=True)
    elapsed = time.perf_counter() - start
    est_t, gt_t = torch.from_numpy(result.transform), torch.from_numpy(gt)
    rre = float(relative_rotation_error_deg(est_t, gt_t))
    rte = float(relative_translation_error(est_t, gt_t))
    rmse = float(transform_rmse(torch.from_numpy(src.astype(np.float64)), est_t, gt_t))
    ir = float(
        inlier_ratio(
            torch.from_numpy(result.src_corr_points),
            torch.from_numpy(result.ref_corr_points),
            gt_t,
            radius=0.1,
        )
    )
    record = {
        "pair": description,
        "method": "fpfh-ransac+icp (Open3D; the learned model ships separately)",
        "voxel_size_m": voxel_size,
        "transform": result.transform.tolist(),
        "gt_transform": gt.tolist(),
        "rre_deg": rre,
        "rte_m": rte,
        "rmse_m": rmse,
        "registered": rmse <= 0.2,
        "num_correspondences": len(result.src_corr_points),
        "inlier_ratio": ir,
        "fitness": result.fitness,
        "time_s": elapsed,
    }
    write_transform(out / "transform.txt", result.transform, overwrite=force)
    with atomic_output(out / "result.json", overwrite=force) as tmp:
        tmp.write_text(json.dumps(record, indent=1) + "\n")
    from pcreg.viz import save_alignment_png

    save_alignment_png(
        out / "alignment.png",
        src,
        ref,
        result.transform,
        overwrite=force,
        correspondences=(result.src_corr_points, result.ref_corr_points),
        title=f"{description}: RRE {rre:.2f} deg, RTE {100 * rte:.1f} cm, {elapsed:.1f} s",
    )
    matrix = "\n".join("  " + " ".join(f"{v: .5f}" for v in row) for row in result.transform)
    return (
        f"{description}\nmethod: {record['method']}\nT_ref_src =\n{matrix}\n"
        f"RRE {rre:.2f} deg, RTE {100 * rte:.1f} cm, RMSE {100 * rmse:.1f} cm -> "
        f"{'registered' if record['registered'] else 'NOT registered'} (3DMatch: RMSE <= 20 cm); "
        f"{elapsed:.2f} s\nwrote {', '.join(str(out / n) for n in OUTPUTS)}"
    )
