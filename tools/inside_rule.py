"""Measure the object-in-scene rule (:mod:`pcreg.registration.inside`) on generated cases.

For each seed and kind (:data:`pcreg.data.synthetic.inside.KINDS`) it runs the search, prints
its measurements, whether the pose is right (rotation under 5 deg, the small cloud's centre
within 10 % of its extent) and whether the rule registers it, then the success and
false-registration counts per kind. The thresholds were chosen on seeds below 1,000
(``python tools/inside_rule.py --seeds 0-29``); the tests use seeds from 1,000,000 on.
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np

from pcreg.data.synthetic.inside import KINDS, inside_case
from pcreg.registration.checks import cloud_extent
from pcreg.registration.inside import find_inside, inside_rule
from pcreg.registration.verdict import pose_distance

logger = logging.getLogger("inside_rule")


def right(transform: np.ndarray, truth: np.ndarray, src: np.ndarray) -> bool:
    """Rotation within 5 deg and the source's centre within 10 % of its extent."""
    deg, shift = pose_distance(transform, truth, src.mean(axis=0))
    return deg < 5.0 and shift < 0.1 * cloud_extent(src)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-19", help="a range, e.g. 0-19")
    parser.add_argument("--kinds", default=",".join(KINDS))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    lo, hi = (int(x) for x in args.seeds.split("-"))
    tally: dict[str, list[int]] = {}
    for seed in range(lo, hi + 1):
        for kind in args.kinds.split(","):
            case = inside_case(seed, kind)
            t0 = time.perf_counter()
            found = find_inside(case.src, case.ref)
            took = time.perf_counter() - t0
            ok = case.transform is not None and right(found.transform, case.transform, case.src)
            reason = inside_rule(found)
            tally.setdefault(kind, [0, 0, 0])
            tally[kind][0] += 1
            tally[kind][1] += int(ok)
            tally[kind][2] += int(not reason)
            logger.info(
                "%d %-10s right=%d registered=%d %s %.2fs %s",
                seed, kind, ok, not reason,
                " ".join(f"{k}={v:.3f}" for k, v in found.features.items()),
                took, reason[:60],
            )  # fmt: skip
    for kind, (n, good, reg) in tally.items():
        logger.info("%-10s %d cases: %d right poses, %d registered", kind, n, good, reg)


if __name__ == "__main__":
    main()
