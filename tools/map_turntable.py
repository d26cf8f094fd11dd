"""Issue #45's turntable check of ``pcreg map``: every view of a Stanford object moved by a
random rigid motion and shuffled, mapped, and compared with the ``.conf`` poses
(:mod:`pcreg.bench.turntable_map`).

    python tools/map_turntable.py ../shared/train_data/stanford_bunny_range_scans OUT \
        [--seed 0] [--workers 2] [--candidates all]

Writes the moved views into OUT/views, the map into OUT/map and prints one line per view.
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
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--candidates", default="all")
    parser.add_argument("--force", action="store_true", help="replace what an earlier run "
                        "wrote into OUT")  # fmt: skip
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    import pcreg
    from pcreg.bench.turntable_map import (
        MAX_ROTATION_DEG,
        MAX_TRANSLATION_FRACTION,
        placement_errors,
        turntable_case,
    )
    from pcreg.mapping.outputs import check_out_dir

    check_out_dir(args.out / "map", overwrite=args.force)  # before anything is written
    case = turntable_case(args.root, args.out / "views", args.seed, overwrite=args.force)
    start = time.perf_counter()
    result = pcreg.map(case.files, args.out / "map", workers=args.workers,
                       candidates=args.candidates, overwrite=args.force, progress=True)  # fmt: skip
    wall = time.perf_counter() - start
    clouds = [np.load(f) for f in case.files]
    err = placement_errors(result.poses, case, clouds)
    for k, name in enumerate(case.names):
        print(
            f"view {k:2d} {name:24s} rot {err['rotation_deg'][k]:7.3f} deg  "
            f"trans {err['translation'][k] * 1000:7.3f} mm ({100 * err['fraction'][k]:.3f} %)"
        )
    ok = (err["rotation_deg"] <= MAX_ROTATION_DEG) & (err["fraction"] <= MAX_TRANSLATION_FRACTION)
    summary = {
        "root": str(args.root), "seed": args.seed, "views": len(case.files),
        "diagonal_m": case.diagonal, "wall_s": wall, "pairs": len(result.edges),
        "registered": sum(e.registered for e in result.edges),
        "kept": sum(e.kept for e in result.edges),
        "rejected": sum(e.registered and not e.kept for e in result.edges),
        "placed": int(result.placed.sum()), "within": int(ok.sum()),
        "max_rotation_deg": float(np.nanmax(err["rotation_deg"])),
        "max_translation_fraction": float(np.nanmax(err["fraction"])),
        "median_rotation_deg": float(np.nanmedian(err["rotation_deg"][1:])),
        "median_translation_mm": float(np.nanmedian(err["translation"][1:]) * 1000),
    }  # fmt: skip
    print(json.dumps(summary))
    return 0 if ok.all() else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except InputError as err:  # an existing OUT without --force: one line, exit 2
        print(f"{Path(sys.argv[0]).name}: {err}", file=sys.stderr)
        sys.exit(2)
