"""Median in-process time of the default ``pcreg.register`` on the real pairs of
``../shared/data`` (one warm-up call, then ``RUNS`` timed calls per pair), as JSON: ``{pair:
[median seconds, registered]}``. Run it with ``PYTHONPATH=<a checkout>`` to time that
checkout's code, alternating checkouts round by round on a quiet machine (BENCHMARKS.md,
"When a result says `registered`": the verdict's time budget).

    PYTHONPATH=/path/to/checkout python tools/time_default_path.py [RUNS]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def main() -> None:
    import pcreg
    from pcreg.bench.real_pairs import real_pairs
    from pcreg.io import read_points

    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(pcreg.__file__, file=sys.stderr)  # which checkout ran
    out = {}
    for pair in real_pairs(SHARED):
        src, ref = read_points(pair.src), read_points(pair.ref)
        pcreg.register(src, ref)  # warm: models loaded, exports made
        times, result = [], None
        for _ in range(runs):
            start = time.perf_counter()
            result = pcreg.register(src, ref)
            times.append(time.perf_counter() - start)
        out[pair.name] = [round(float(np.median(times)), 3), bool(result.registered)]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
