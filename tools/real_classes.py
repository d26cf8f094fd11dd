"""Every class of issue #41 on real scans, registered as a user runs it (``pcreg.register`` with
no flags): how many are registered, and how many of those are wrong.

    python tools/real_classes.py OUT.jsonl [--rounds 10] [--seed 0] [--data ../shared/data]

One JSON line per case is appended to ``OUT.jsonl``; a run that stops is continued by the same
command (the cases are seeded: those whose index is recorded are skipped; a file of another
``--seed`` is refused). The table of
:func:`pcreg.bench.real_classes.format_table` is printed at the end (``--table-only``: just
the table of what is there). The classes and data: :mod:`pcreg.bench.real_classes`.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pcreg.bench.real_classes import (  # noqa: E402
    format_table,
    judge,
    real_class_cases,
    summarise,
)
from pcreg.bench.records import load_records  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    done = load_records(args.out)
    seeds = {r.get("seed") for r in done}
    if seeds - {args.seed}:
        parser.error(f"{args.out} holds cases of seed {sorted(seeds)}, not {args.seed}: "
                     "name another file")  # fmt: skip
    if not args.table_only:
        import numpy as np
        from tqdm import tqdm

        import pcreg
        from pcreg.errors import InputError

        have = {r["index"] for r in done}
        if args.out.is_file() and args.out.stat().st_size:
            with open(args.out, "rb") as fh:  # a line cut short: start on a fresh one
                fh.seek(-1, 2)
                torn = fh.read(1) != b"\n"
            if torn:
                with open(args.out, "a") as fh:
                    fh.write("\n")
        with open(args.out, "a") as fh:
            cases = real_class_cases(args.data, args.rounds, args.seed)
            for index, case in enumerate(tqdm(cases, desc="cases")):
                if index in have:  # the cases are seeded: the same index is the same case
                    continue
                t0 = time.perf_counter()
                try:
                    result = pcreg.register(case.src, case.ref)
                    transform, registered, reason = (
                        result.transform,
                        result.registered,
                        result.reason,
                    )
                    path = result.method_used or result.method
                except InputError as err:  # refused as input: not registered
                    transform, registered, reason, path = None, False, str(err), ""
                rec = judge(case, None if transform is None else np.asarray(transform), registered)
                rec.update(index=index, seed=args.seed, reason=str(reason)[:200], path=path,
                           time_s=round(time.perf_counter() - t0, 3))  # fmt: skip
                fh.write(json.dumps(rec) + "\n")
                fh.flush()
                done.append(rec)
                if rec["wrong"]:
                    tqdm.write(f"wrong but registered: {json.dumps(rec)}")
    command = "python tools/real_classes.py OUT.jsonl " + " ".join(
        f"--{k} {v}" for k, v in (("rounds", args.rounds), ("seed", args.seed))
    )
    print(format_table(summarise(done), command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
