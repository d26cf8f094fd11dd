"""Real objects in real scenes (:mod:`pcreg.bench.real_inside`), registered as a user runs
them (``pcreg.register`` with no flags): how many register right, how many register wrong,
and how many right poses are refused.

    python tools/real_inside.py [--cases 12] [--seed 0] [--kinds crop,template]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pcreg.bench.real_inside import KINDS, real_inside_cases, right  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=12, help="per kind")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "train_data")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    import pcreg
    from pcreg.errors import InputError

    for kind in args.kinds.split(","):
        tally = dict.fromkeys(("right", "wrong", "right pose refused", "refused", "negatives",
                               "negatives registered"), 0)  # fmt: skip
        times = []
        for case in real_inside_cases(args.data, args.cases, kind, args.seed):
            t0 = time.perf_counter()
            try:
                result = pcreg.register(case.src, case.ref)
                registered, transform, reason = result.registered, result.transform, result.reason
            except InputError as err:
                registered, transform, reason = False, None, str(err)
            times.append(time.perf_counter() - t0)
            if case.transform is None:
                tally["negatives"] += 1
                tally["negatives registered"] += registered
                outcome = "registered (wrong)" if registered else "refused"
            else:
                ok = transform is not None and right(
                    np.asarray(transform), case.transform, case.src
                )
                outcome = ("right" if ok else "wrong") if registered else (
                    "right pose refused" if ok else "refused")  # fmt: skip
                tally[outcome] += 1
            print(f"{kind} {case.name}: {outcome} ({times[-1]:.2f} s) {reason[:100]}", flush=True)
        print(f"{kind}: " + ", ".join(f"{k} {v}" for k, v in tally.items())
              + f"; median {np.median(times):.2f} s, max {max(times):.2f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
