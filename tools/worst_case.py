"""In-process time and answer of the default ``pcreg.register`` on the slow kinds of pair a
hostile run of the command line found, rebuilt from ``../shared`` (evaluation and training
scans; nothing here is fitted to them): far and unrelated LiDAR scans, two halves of an
object view that do not touch, mirrored scans, far KITTI pairs, and the 3DMatch demo pair as
the reference. Two warm-up calls, an indoor and an outdoor pair (each shipped network loaded,
and exported where this code has no export yet: about 7 s, once per code change), and Open3D
loaded (0.45 s once per process, which the first pair to reach FPFH + RANSAC would otherwise
pay for); then each pair once; a Markdown table on stdout. Run it with
``PYTHONPATH=<a checkout>`` to time that checkout's code (BENCHMARKS.md, "The worst case").

    PYTHONPATH=/path/to/checkout python tools/worst_case.py [--only TEXT]

``--only TEXT``: the pairs whose name contains ``TEXT`` (the warm-up calls still run).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
KITTI_TRAIN = SHARED / "train_data" / "kitti_seq00-07_semantickitti_mini"
KITTI_00 = SHARED / "data" / "kitti00_scancontext"
FRAGMENTS = SHARED / "data" / "regtr_3dmatch_fragments" / "7-scenes-redkitchen"
DEMO = SHARED / "data" / "geotransformer_repo" / "demo"
BUNNY = SHARED / "train_data" / "stanford_bunny_range_scans" / "scans" / "bun000.npy"
DRAGON = SHARED / "train_data" / "stanford_dragon_stand_range_scans" / "scans"


def _motion(rng: np.random.Generator, reach: float) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = Rotation.random(random_state=int(rng.integers(1 << 30))).as_matrix()
    out[:3, 3] = rng.uniform(-reach, reach, 3)
    return out


def _moved(points: np.ndarray, motion: np.ndarray) -> np.ndarray:
    return points @ motion[:3, :3].T + motion[:3, 3]


def _extent(points: np.ndarray) -> float:
    return float(np.linalg.norm(np.ptp(points, axis=0)))


def pairs(rng: np.random.Generator):
    """``(name, src, ref, truth or None)``: truth ``T_ref_src`` where the pair has a right
    answer, None where it has none (the answer must be not registered)."""
    from pcreg.io import read_points

    def load(path: Path) -> np.ndarray:
        return read_points(path).astype(np.float64)[:, :3]

    train = {(p["seq"], p["src_frame"], p["ref_frame"]): p
             for p in json.loads((KITTI_TRAIN / "pairs.json").read_text())["pairs"]}  # fmt: skip
    seq = KITTI_TRAIN / "sequences"
    frames = (("01", 0), ("04", 0), ("03", 3), ("07", 3))
    scan = {s: load(seq / f"{s}/velodyne/{f:06d}.bin") for s, f in frames}
    yield "KITTI 01 scan 0 vs KITTI 04 scan 0 (two highways)", scan["01"], scan["04"], None
    yield "KITTI 03 scan 3 vs KITTI 07 scan 3", scan["03"], scan["07"], None
    views = (("the bunny's first view", load(BUNNY)),
             ("the dragon's first view", load(DRAGON / "dragonStandRight_0.npy")))  # fmt: skip
    for name, cloud in views:
        centre = cloud.mean(axis=0)
        axis = np.linalg.eigh(np.cov((cloud - centre).T))[1][:, -1]
        side = (cloud - centre) @ axis > 0
        moved = _moved(cloud[side], _motion(rng, _extent(cloud) / 3))
        yield f"two halves of {name} that do not touch", moved, cloud[~side], None
    k94 = load(KITTI_00 / "000094.bin")
    for name, cloud in (("KITTI 00 scan 94", k94), ("the bunny's first view", load(BUNNY)),
                        ("3DMatch fragment 0", load(FRAGMENTS / "cloud_bin_0.npy"))):  # fmt: skip
        mirror = cloud * np.array([-1.0, 1.0, 1.0])
        yield (f"{name} mirrored, moved, vs itself",
               _moved(mirror, _motion(rng, _extent(cloud) / 3)), cloud, None)  # fmt: skip
    yield "KITTI 00 scans 94 and 198, 58 m apart", k94, load(KITTI_00 / "000198.bin"), None
    for s in ("04", "02", "06"):
        p = train[(s, 0, 9)]
        yield (f"KITTI {s} scans 0 and 9 ({p['distance_m']:.0f} m)", load(KITTI_TRAIN / p["src"]),
               load(KITTI_TRAIN / p["ref"]), np.array(p["T_ref_src"]))  # fmt: skip
    from pcreg.bench.real_pairs import real_pairs

    for pair in real_pairs(SHARED / "data"):
        if pair.name in ("KITTI 199<-198", "3DMatch 0<-6"):
            yield pair.name, load(pair.src), load(pair.ref), np.asarray(pair.gt, np.float64)
    noise = np.random.default_rng(0)  # its own draws: the rows above keep their motions
    yield ("two 3 m boxes of 6,000 uniform random points each, in millimetres",
           noise.uniform(0, 3000, (6000, 3)), noise.uniform(0, 3000, (6000, 3)), None)  # fmt: skip


def main() -> None:
    import pcreg
    from pcreg.geometry import pose_errors
    from pcreg.io import read_points
    from pcreg.registration.promise import keeps_promise

    print(pcreg.__file__, file=sys.stderr)  # which checkout ran
    rng = np.random.default_rng(20261127)
    demo = (np.load(DEMO / "src.npy"), np.load(DEMO / "ref.npy"))
    pcreg.register(*demo)  # warm: the indoor network loaded (exported, where this code has none)
    kitti = [read_points(KITTI_00 / f"0000{i}.bin").astype(np.float64)[:, :3] for i in (95, 94)]
    pcreg.register(*kitti)  # and the outdoor network
    import open3d  # noqa: F401 - FPFH + RANSAC's library, loaded once per process

    only = ""
    if "--only" in sys.argv:
        if sys.argv[-1] == "--only":
            sys.exit("--only needs a text: the pairs whose name contains it")
        only = sys.argv[sys.argv.index("--only") + 1]
    print("| pair | answer | s |\n|---|---|---:|")
    for name, src, ref, truth in pairs(rng):
        if only not in name:
            continue
        start = time.perf_counter()
        result = pcreg.register(src, ref)
        seconds = time.perf_counter() - start
        answer = "registered" if result.registered else "not registered"
        if truth is not None and result.registered:
            err = pose_errors(result.transform, truth, src)
            right = keeps_promise(err, _extent(ref), street=result.setting == "outdoor")
            answer += ", right" if right else ", WRONG"
        elif truth is None and result.registered:
            answer += ", WRONG (no right answer)"
        if result.verdict is not None and result.verdict.reason.startswith("mirror:"):
            answer += " (`mirror:`)"
        print(f"| {name} | {answer} | {seconds:.2f} |", flush=True)


if __name__ == "__main__":
    main()
