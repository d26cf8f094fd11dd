"""Where a default in-process registration spends its time, stage by stage, on the real pairs
of ``../shared/data``: the shipped networks on ONNX Runtime (the default) and on torch
(``PCREG_RUNTIME=torch``), each in its own process, one after the other.

    python tools/stage_split.py [--runs 5]

Each process registers its pair once (loading), then ``--runs`` times under cProfile, on one
thread (``PCREG_THREADS=1``: cProfile follows only the main thread); a stage's time is the
cumulative time of the functions that make it, per registration (cProfile adds ~10-20 % to
Python-heavy stages; compare the two runtimes' rows, not these to wall times).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: stage -> functions ``(file suffix, function name)`` whose cumulative time makes it, per
#: runtime; a function called inside another listed one must not be listed twice
STAGES = {
    "orientation proposal (Manhattan frames, cube ranking)": {
        "both": [("registration/search.py", "propose")],
    },
    "neighbor pyramid": {
        "torch": [("data/collate.py", "collate_pairs")],
        "onnx": [("registration/onnx_network.py", "_pyramids")],
    },
    "KPConv backbone": {
        "torch": [("kpconv/fpn.py", "forward")],
        "onnx": [("registration/onnx_network.py", "_backbone")],
    },
    "geometric transformer (with its embedding)": {
        "torch": [
            ("geotransformer/model.py", "coarse_matching"),
            ("geotransformer/transformer.py", "embed"),
        ],
        "onnx": [
            ("registration/onnx_network.py", "_embed"),
            ("registration/onnx_network.py", "_transformer"),
        ],
    },
    "optimal transport": {
        "torch": [("geotransformer/matcher.py", "assignment")],
        "onnx": [("registration/onnx_network.py", "_assignment")],
    },
    "matching and local-to-global registration": {
        "torch": [
            ("geotransformer/model.py", "estimate"),
            ("geotransformer/model.py", "_node_correspondences"),
        ],
        "onnx": [
            ("runtime/matching.py", "correspondences"),
            ("runtime/lgr.py", "local_to_global_registration"),
            ("runtime/matching.py", "superpoint_matching"),
            ("runtime/partition.py", "point_to_node_partition"),
        ],
    },
    "ICP, verification, verdict": {
        "both": [("registration/pipeline.py", "_finish")],
    },
}

_CHILD = r"""
import cProfile, json, pstats, sys, time
import numpy as np
import pcreg
from pcreg.io import read_points
pairs = json.loads(sys.argv[1]); runs = int(sys.argv[2])
out = {}
for name, (src, ref) in pairs.items():
    s, r = read_points(src), read_points(ref)
    pcreg.register(s, r)
    prof = cProfile.Profile()
    start = time.perf_counter()
    prof.enable()
    for _ in range(runs):
        pcreg.register(s, r)
    prof.disable()
    wall = (time.perf_counter() - start) / runs
    stats = pstats.Stats(prof).stats
    cum = {f"{k[0]}::{k[2]}": v[3] / runs for k, v in stats.items()}
    out[name] = {"wall": wall, "cum": cum}
print(json.dumps(out))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--shared-data", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args()
    demo = args.shared_data / "geotransformer_repo" / "demo"
    kitti = args.shared_data / "kitti00_scancontext"
    pairs = {
        "3DMatch 0<-6 (demo)": (str(demo / "src.npy"), str(demo / "ref.npy")),
        "KITTI 95<-94": (str(kitti / "000094.bin"), str(kitti / "000095.bin")),
    }
    results = {}
    for runtime in ("onnx", "torch"):
        # one thread: cProfile sees only the main thread, and the ONNX path's second lane
        # (pcreg.registration.onnx_network._Lanes) would hide half of its work
        env = {**os.environ, "PCREG_RUNTIME": "auto" if runtime == "onnx" else "torch",
               "PCREG_THREADS": "1"}  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, json.dumps(pairs), str(args.runs)],
            capture_output=True, text=True, env=env, check=True,
        )  # fmt: skip
        results[runtime] = json.loads(proc.stdout.strip().splitlines()[-1])
    for pair in pairs:
        print(f"\n{pair}: ms per registration (cProfile cumulative, {args.runs} runs)")
        print("| stage | torch | ONNX Runtime |")
        print("|---|---:|---:|")
        for stage, funcs in STAGES.items():
            row = []
            for runtime in ("torch", "onnx"):
                cum = results[runtime][pair]["cum"]
                total = 0.0
                for suffix, name in funcs.get("both", funcs.get(runtime, [])):
                    total += sum(
                        v
                        for k, v in cum.items()
                        if k.endswith(f"::{name}") and suffix in k.split("::")[0]
                    )
                row.append(total)
            print(f"| {stage} | {1000 * row[0]:.1f} | {1000 * row[1]:.1f} |")
        walls = [results[r][pair]["wall"] for r in ("torch", "onnx")]
        print(
            f"| whole registration (wall, under cProfile) | {1000 * walls[0]:.1f} | "
            f"{1000 * walls[1]:.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
