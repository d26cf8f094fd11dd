"""Measure the shift probe (:func:`pcreg.registration.symmetry.shift_probe`) on the labelled
verdict set's *fit* scenes (:mod:`pcreg.bench.verdict_set`; never its held-out ones, never
evaluation data): each case through the default ``pcreg.register``, and at its best estimate
the shipped margin (another place that fits, with a drop in fit on the way there) beside the
raw one (every shifted pose, slides too). Prints, per family, the margins of the right and
the wrong registrations, and which registrations :data:`~pcreg.registration.verdict.
SHIFT_MARGIN` refuses, as JSON lines to ``--out`` and a summary.

    python tools/shift_margins.py --rooms 14 --objects 5 --streets 3 --seed 11 --out m.jsonl

The cases drawn depend on the counts and ``--seed`` (the set's own build used seed 0).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

logger = logging.getLogger("shift_margins")


def _raw_margin(case, transform: np.ndarray, voxel: float) -> float:
    """The shift probe's margin with every shifted pose counted (no drop in fit required),
    at ``voxel`` in the case's own units."""
    from pcreg.geometry.clouds import downsample_with_normals
    from pcreg.registration.symmetry import shift_probe
    from pcreg.registration.verdict import scene_size

    src, ref = downsample_with_normals(case.src, voxel), downsample_with_normals(case.ref, voxel)
    margin, _ = shift_probe(src, ref, transform, voxel, case.src.mean(axis=0),
                            scene_size(case.ref), valley=float("inf"))  # fmt: skip
    return margin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rooms", type=int, default=14)
    parser.add_argument("--objects", type=int, default=5)
    parser.add_argument("--streets", type=int, default=3)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from tqdm import tqdm

    from pcreg.api import pipeline
    from pcreg.bench.verdict_set import cases, label_candidates, split_of
    from pcreg.errors import InputError
    from pcreg.registration.verdict import SHIFT_MARGIN

    pipe = pipeline(None, method="auto")
    recs = []
    with open(args.out, "w") as fh:
        drawn = cases(args.rooms, args.objects, args.streets, None, 2, args.seed)
        for case in tqdm(drawn, desc="cases"):
            if split_of(case.scene) != "fit":
                continue
            try:
                result = pipe(case.src, case.ref)
            except InputError:
                continue
            best = result.verdict.best if result.verdict is not None else None
            if best is None:
                continue
            right = label_candidates(case, [best.transform])[0]["right"]
            shift = float(best.features.get("shift_margin", 0.0))
            rec = {"family": case.family, "cls": case.cls, "name": case.name,
                   "registered": bool(result.registered), "reason": result.reason,
                   "right": bool(right), "shift_margin": shift, "raw": None}  # fmt: skip
            if best.features.get("log_inliers", 0.0) > 1.5:
                rec["raw"] = _raw_margin(case, best.transform, best.result.voxel_size)
            recs.append(rec)
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
    for fam in ("rooms", "objects", "streets"):
        got = [r for r in recs if r["family"] == fam]
        for right in (True, False):
            sel = [
                r
                for r in got
                if r["right"] == right
                and (r["registered"] or r["reason"].startswith("ambiguous: the source fits"))
            ]
            shipped = sorted(round(r["shift_margin"], 3) for r in sel)
            raw = sorted(round(r["raw"], 3) for r in sel if r["raw"] is not None)
            refused = sum(r["shift_margin"] >= SHIFT_MARGIN for r in sel)
            print(
                f"{fam} {'right' if right else 'wrong'}: {len(sel)} registered or refused "
                f"by the shift probe ({refused}); shipped margin max "
                f"{max(shipped, default=0)}, top {shipped[-5:]}; raw top {raw[-5:]}"
            )
        print(f"{fam}: {len(got)} cases")


if __name__ == "__main__":
    main()
