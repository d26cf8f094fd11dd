"""Whole scanned rooms (two terrestrial-scanner stations of generated rooms, and unrelated
rooms), registered as a user runs them: how many register, how many of those are wrong, and
how long each takes (:mod:`pcreg.bench.whole_rooms`).

    python tools/whole_rooms.py OUT.jsonl --first 4130 --rooms 12

One JSON line per case is appended to ``OUT.jsonl``; a stopped run is continued by the same
command (cases already recorded are skipped; a file of another ``--first`` is refused). The
time is ``pcreg.register`` in this process, after one warm-up registration of the 3DMatch demo
pair where ``../shared/data`` has it.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pcreg.bench.records import room_run  # noqa: E402
from pcreg.bench.whole_rooms import format_table, is_right, room_cases, summarise  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    args, done = room_run(__doc__, 4130, 12, argv)
    logging.basicConfig(level=logging.WARNING)
    if not args.table_only:
        import numpy as np
        from tqdm import tqdm

        import pcreg

        demo = REPO.parent / "shared" / "data" / "geotransformer_repo" / "demo"
        if (demo / "src.npy").is_file():  # the warm-up: loads and exports the networks
            pcreg.register(np.load(demo / "src.npy"), np.load(demo / "ref.npy"))
        have = {r["name"] for r in done}
        with args.out.open("a") as fh:
            for case in tqdm(room_cases(args.first, args.rooms), desc="cases",
                             total=4 * args.rooms):  # fmt: skip
                if case.name in have:
                    continue
                rec = {"first": args.first, "name": case.name, "cls": case.cls,
                       "size": case.size}  # fmt: skip
                t0 = time.perf_counter()
                try:
                    res = pcreg.register(case.src, case.ref)
                except Exception as err:  # a refused input is a record too
                    rec["error"] = f"{type(err).__name__}: {err}"[:200]
                else:
                    rec.update(seconds=round(time.perf_counter() - t0, 3),
                               registered=bool(res.registered),
                               right=is_right(case, res.transform), units=res.units,
                               reason=res.reason)  # fmt: skip
                fh.write(json.dumps(rec, default=float) + "\n")
                fh.flush()
                done.append(rec)
    command = f"python tools/whole_rooms.py OUT --first {args.first} --rooms {args.rooms}"
    print(format_table(summarise(done), command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
