"""Ray against the process pool it replaced, both running today's pipeline, in one run.

    python tools/compare_old_pool.py GEN [--pairs 112] [--rounds 5] [--workers 2]

GEN: a generated indoor set (``python tools/generate_synthetic.py indoor GEN --split val
--scenes 4 --seed 1000000``). The old pool (``WorkerPool``, deleted when pcreg moved to Ray) is
read from this repository's history (``git show accb911^:pcreg/registration/workers.py``) into
a temporary module; it and :class:`pcreg.batch.runner.RayRunner` register the same in-memory
pairs with the shipped ``indoor`` network and no ICP (what ``pcreg evaluate workers=N``
runs), each worker on the same torch threads: the pool's ``cores // workers``, Ray's cores per
Ray CPU. Each run is its own process, the runners taking turns within
every round. A run starts its runner, registers the first ``2 x workers`` pairs (every worker
process then has imported torch, built its network and made its first, slower call), then
times ``map`` over the ``--pairs`` pairs. Printed: a JSON line per run (start, warm-up, map,
close and total seconds, pairs registered), then per round each runner's pairs/s over the
timed ``map`` and Ray's ratio to the pool, and their medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
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
        running.map(pairs[: 2 * workers])  # every worker warm
        t2 = time.perf_counter()
        results = running.map(pairs)
        t3 = time.perf_counter()
    t4 = time.perf_counter()
    return {"runner": runner, "pairs": n, "start_s": round(t1 - t0, 2), "warm_s": round(t2 - t1, 2),
            "map_s": round(t3 - t2, 2), "close_s": round(t4 - t3, 2), "total_s": round(t4 - t0, 2),
            "pairs_per_s": round(len(pairs) / (t3 - t2), 3),
            "registered": sum(bool(r.registered) for r in results)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gen", type=Path)
    parser.add_argument("--pairs", type=int, default=112)
    parser.add_argument("--rounds", type=int, default=5)
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
                out = subprocess.run(
                    [sys.executable, __file__, str(args.gen), "--workers", str(args.workers),
                     "--one", runner, str(args.pairs), pool_dir],
                    check=True, capture_output=True, text=True,
                ).stdout  # fmt: skip
                rows.append(json.loads(out.strip().splitlines()[-1]))
                print(json.dumps(rows[-1]), flush=True)
    pool = [x["pairs_per_s"] for x in rows if x["runner"] == "pool"]
    ray = [x["pairs_per_s"] for x in rows if x["runner"] == "ray"]
    for r, (a, b) in enumerate(zip(pool, ray, strict=True)):
        print(f"round {r + 1}: pool {a:.2f} pairs/s, Ray {b:.2f} pairs/s, Ray / pool {b / a:.3f}")
    ratios = [b / a for a, b in zip(pool, ray, strict=True)]
    spread = f"{min(ratios):.3f}-{max(ratios):.3f}"
    print(f"median: pool {statistics.median(pool):.2f}, Ray {statistics.median(ray):.2f} pairs/s, "
          f"Ray / pool {statistics.median(ratios):.3f} (rounds {spread})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
