"""Loop closure against chained odometry on a real loop: the Stanford dragon's 15 turntable
views in their order around the table (each moved by a random rigid motion), registered

- as ``pcreg odometry`` does: each view onto the previous one, the motions chained
  (:func:`pcreg.odometry.run_odometry`, ``method="auto"``);
- as ``pcreg map --sequence --candidates knn`` does: the consecutive pairs, then each view's
  ``--neighbours`` best loop candidates by the FPFH overlap score among its revisits (the
  views the chain comes back to, :func:`pcreg.mapping.candidates.revisits`), through the pose
  graph.

    python tools/map_loop.py ../shared/train_data/stanford_dragon_stand_range_scans OUT \
        [--neighbours 3] [--workers 2]

Prints per view the rotation error and the translation error at its centroid of both, against
the ``.conf`` poses after aligning the first view, and their RMS (the APE of the centroids).
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--neighbours", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--force", action="store_true", help="replace what an earlier run "
                        "wrote into OUT")  # fmt: skip
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    import pcreg
    from pcreg.bench.turntable_map import placement_errors, turntable_case
    from pcreg.mapping.outputs import check_out_dir
    from pcreg.odometry import run_odometry

    check_out_dir(args.out / "map", overwrite=args.force)  # before anything is written
    case = turntable_case(args.root, args.out / "views", args.seed, shuffle=False,
                          overwrite=args.force)  # fmt: skip
    clouds = [np.load(f) for f in case.files]
    start = time.perf_counter()
    chain = run_odometry(case.files, model=None, method="auto", workers=args.workers)
    chain_s = time.perf_counter() - start
    start = time.perf_counter()
    graph = pcreg.map(case.files, args.out / "map", sequence=True, candidates="knn",
                      neighbours=args.neighbours, workers=args.workers,
                      overwrite=args.force)  # fmt: skip
    graph_s = time.perf_counter() - start
    rows = {}
    for name, poses in (("chained odometry", chain.poses), ("map --sequence", graph.poses)):
        err = placement_errors(poses, case, clouds)
        rows[name] = err
    for k, view in enumerate(case.names):
        line = " | ".join(
            f"{n}: {rows[n]['rotation_deg'][k]:6.3f} deg {1000 * rows[n]['translation'][k]:7.3f} mm"
            for n in rows
        )
        print(f"{k:2d} {view:22s} {line}")
    summary = {
        name: {
            "max_rotation_deg": float(np.nanmax(err["rotation_deg"])),
            "rms_translation_mm": float(1000 * np.sqrt(np.nanmean(err["translation"] ** 2))),
            "max_translation_fraction": float(np.nanmax(err["fraction"])),
        }
        for name, err in rows.items()
    }
    summary["chained odometry"].update(
        pairs=len(case.files) - 1, registered=int(chain.registered.sum()), wall_s=chain_s
    )
    summary["map --sequence"].update(
        pairs=len(graph.edges), registered=sum(e.registered for e in graph.edges),
        kept=sum(e.kept for e in graph.edges), placed=int(graph.placed.sum()), wall_s=graph_s,
        loops_kept=sum(e.kept and e.kind == "loop" for e in graph.edges),
    )  # fmt: skip
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except InputError as err:  # an existing OUT without --force: one line, exit 2
        print(f"{Path(sys.argv[0]).name}: {err}", file=sys.stderr)
        sys.exit(2)
