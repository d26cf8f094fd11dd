"""Ray against the process pool it replaced, both running today's pipeline, in one run.

    python tools/compare_old_pool.py GEN [--pairs 56 112] [--rounds 3] [--workers 2]

GEN: a generated indoor set (``python tools/generate_synthetic.py indoor GEN --split val
--scenes 4 --seed 1000000``). The old pool (``WorkerPool``, deleted when pcreg moved to Ray) is
read from this repository's history (``git show accb911^:pcreg/registration/workers.py``) into
a temporary module; it and :class:`pcreg.batch.runner.RayRunner` register the same in-memory
pairs with the shipped ``indoor`` network, one torch thread per worker, no ICP (what ``pcreg
evaluate workers=N`` runs). Each (runner, pair count) runs in its own process, the runners
taking turns within every round. Printed: a JSON line per run (start, map, close and total
seconds, pairs registered), then per round each runner's marginal rate: the pairs between the
two counts over the difference of their ``map`` times (start-up excluded).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OLD_POOL = "accb911^:pcreg/registration/workers.py"


def run_one(runner: str, gen: Path, n: int, workers: int, pool_dir: str) -> dict:
    """One measurement, in this (fresh) process."""
    import numpy as np

    from pcreg.engine.heap import retain_freed_memory

    retain_freed_memory()  # what the pcreg command does (pcreg/engine/heap.py)
    meta = json.loads((gen / "metadata" / "val.json").read_text())[:n]
    pairs = [(np.load(gen / "data" / m["pcd0"]), np.load(gen / "data" / m["pcd1"])) for m in meta]
    model = str(Path(__file__).resolve().parents[1] / "pcreg" / "weights" / "indoor.pt")
    t0 = time.perf_counter()
    if runner == "pool":
        sys.path.insert(0, pool_dir)
        from old_workers import WorkerPool  # type: ignore[import-not-found]

        from pcreg.registration.pipeline import Registration

        context = WorkerPool(Registration(model, icp=False), workers)
    else:
        from pcreg.batch.runner import BatchOptions, RayRunner

        context = RayRunner(BatchOptions(model=model, icp=False, retain_heap=True), workers=workers)
    with context as running:
        t1 = time.perf_counter()
        results = running.map(pairs)
        t2 = time.perf_counter()
    t3 = time.perf_counter()
    return {"runner": runner, "pairs": n, "start_s": round(t1 - t0, 2), "map_s": round(t2 - t1, 2),
            "close_s": round(t3 - t2, 2), "total_s": round(t3 - t0, 2),
            "registered": sum(bool(r.registered) for r in results)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gen", type=Path)
    parser.add_argument("--pairs", type=int, nargs=2, default=[56, 112])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--one", nargs=3, metavar=("RUNNER", "N", "POOL_DIR"), help="internal")
    args = parser.parse_args(argv)
    if args.one:
        runner, n, pool_dir = args.one
        print(json.dumps(run_one(runner, args.gen, int(n), args.workers, pool_dir)), flush=True)
        return 0
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as pool_dir:
        source = subprocess.run(["git", "-C", str(repo), "show", OLD_POOL], check=True,
                                capture_output=True, text=True).stdout  # fmt: skip
        (Path(pool_dir) / "old_workers.py").write_text(source)
        rows = []
        for _ in range(args.rounds):
            for runner in ("pool", "ray"):
                for n in args.pairs:
                    out = subprocess.run(
                        [sys.executable, __file__, str(args.gen), "--workers", str(args.workers),
                         "--one", runner, str(n), pool_dir],
                        check=True, capture_output=True, text=True,
                    ).stdout  # fmt: skip
                    rows.append(json.loads(out.strip().splitlines()[-1]))
                    print(json.dumps(rows[-1]), flush=True)
    small, large = args.pairs
    for r in range(args.rounds):
        for runner in ("pool", "ray"):
            mine = [x for x in rows if x["runner"] == runner][2 * r : 2 * r + 2]
            rate = (large - small) / (mine[1]["map_s"] - mine[0]["map_s"])
            print(f"round {r + 1} {runner}: {rate:.2f} pairs/s marginal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
