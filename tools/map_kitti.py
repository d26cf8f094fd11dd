"""``pcreg map --sequence`` against chained odometry on a short KITTI sequence (the
``kitti_seq00-07_semantickitti_mini`` excerpt: frames 0, 3, 6, 9 (and 15 for 00) of a
sequence), both with the outdoor network: APE of the scan positions (RMS of the translation
errors after aligning the first scan, metres) and the largest rotation error, against the
SemanticKITTI poses in the Velodyne frame (``V_k = inv(Tr) P_k Tr``).

    python tools/map_kitti.py ../shared/train_data/kitti_seq00-07_semantickitti_mini/sequences/00 \
        OUT [--workers 2] [--neighbours 3]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

from pcreg.errors import InputError


def _errors(poses: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rot, trans = [], []
    for est, gt in zip(poses, truth, strict=True):
        e = np.linalg.inv(gt) @ est
        rot.append(np.degrees(np.arccos(np.clip((np.trace(e[:3, :3]) - 1) / 2, -1, 1))))
        trans.append(np.linalg.norm(est[:3, 3] - gt[:3, 3]))
    return np.array(rot), np.array(trans)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sequence", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--neighbours", type=int, default=3)
    parser.add_argument("--force", action="store_true", help="replace what an earlier run "
                        "wrote into OUT")  # fmt: skip
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    import pcreg
    from pcreg.data.kitti import read_calib_tr
    from pcreg.mapping.outputs import check_out_dir
    from pcreg.odometry import run_odometry

    check_out_dir(args.out, overwrite=args.force)  # before the chain's registrations
    scans = sorted((args.sequence / "velodyne").glob("*.bin"))
    frames = [int(p.stem) for p in scans]
    cam = np.loadtxt(args.sequence / "poses.txt").reshape(-1, 3, 4)
    tr = read_calib_tr(args.sequence / "calib.txt")
    velo = []
    for f in frames:
        p = np.vstack([cam[f], [0, 0, 0, 1]])
        velo.append(np.linalg.inv(tr) @ p @ tr)
    truth = np.linalg.inv(velo[0]) @ np.stack(velo)
    start = time.perf_counter()
    chain = run_odometry(scans, model="outdoor", method="geotransformer", workers=args.workers)
    chain_s = time.perf_counter() - start
    start = time.perf_counter()
    graph = pcreg.map(scans, args.out, "outdoor", method="geotransformer", sequence=True,
                      candidates="knn", neighbours=args.neighbours, workers=args.workers,
                      overwrite=args.force)  # fmt: skip
    graph_s = time.perf_counter() - start
    out = {"sequence": str(args.sequence), "frames": frames}
    for name, poses, wall in (("chained odometry", chain.poses, chain_s),
                              ("map --sequence", graph.poses, graph_s)):  # fmt: skip
        rot, trans = _errors(poses, truth)
        out[name] = {
            "ape_rmse_m": float(np.sqrt(np.nanmean(trans**2))),
            "max_translation_m": float(np.nanmax(trans)),
            "max_rotation_deg": float(np.nanmax(rot)), "wall_s": wall,
            "per_scan_m": np.round(trans, 4).tolist(),
        }  # fmt: skip
    out["map --sequence"].update(
        pairs=len(graph.edges), registered=sum(e.registered for e in graph.edges),
        kept=sum(e.kept for e in graph.edges), placed=int(graph.placed.sum()),
    )  # fmt: skip
    out["chained odometry"].update(registered=int(chain.registered.sum()), pairs=len(scans) - 1)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except InputError as err:  # an existing OUT without --force: one line, exit 2
        print(f"{Path(sys.argv[0]).name}: {err}", file=sys.stderr)
        sys.exit(2)
