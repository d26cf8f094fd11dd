"""Loop closure with real registrations on generated loops: each generated object's 12
turntable views (``pcreg.data.synthetic.objects.object_views``, 30 deg apart, the last next to
the first), each moved by a random rigid motion, registered in order by chained odometry and by
``pcreg odometry --loop-closure`` (``method="auto"``, the shipped networks). Prints one JSON
line per object: whether each placed every view, and the end-to-start error (the last view's
pose against the first's: its rotation, and the RMS displacement it gives the last view's
points) where it did.

    python tools/generated_loop.py OUT [--seeds 7100000-7100007] [--workers 2] [--force]

Seeds 7,100,000 and up are used by no fit (the verdict set's objects are 5,000,000+).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def _seeds(text: str) -> range:
    first, _, last = text.partition("-")
    return range(int(first), int(last or first) + 1)


def _end_to_start(poses: np.ndarray, truth: np.ndarray, last: np.ndarray, rotation_deg):
    """The last view's pose against the first's, ``(rotation deg, RMS displacement of the
    last view's points, metres)``; ``truth (K, 4, 4)`` T_first_k."""
    error = np.linalg.inv(truth[-1]) @ np.linalg.inv(poses[0]) @ poses[-1]
    moved = last @ error[:3, :3].T + error[:3, 3]
    return rotation_deg(error[:3, :3]), float(np.sqrt(np.mean(np.sum((moved - last) ** 2, 1))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="a directory for the views (.npy)")
    parser.add_argument("--seeds", type=_seeds, default=_seeds("7100000-7100007"))
    parser.add_argument("--views", type=int, default=12)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--force", action="store_true", help="replace views an earlier run "
                        "wrote into OUT")  # fmt: skip
    args = parser.parse_args()
    if args.out.exists() and not args.out.is_dir():
        print(f"generated_loop.py: {args.out}: not a directory", file=sys.stderr)
        return 2
    ours = sorted(args.out.glob("*_[0-9][0-9].npy")) if args.out.is_dir() else []
    if ours and not args.force:
        print(f"generated_loop.py: {args.out}: holds {len(ours)} views of an earlier run "
              "(--force replaces them)", file=sys.stderr)  # fmt: skip
        return 2
    from scipy.spatial.transform import Rotation

    from pcreg.data.synthetic.objects import object_views
    from pcreg.mapping.graph import rotation_deg
    from pcreg.odometry import run_odometry

    args.out.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        got = object_views(seed, num_views=args.views)
        rng = np.random.default_rng(seed)
        files, world = [], []
        for k, (view, pose) in enumerate(zip(got.views, got.poses, strict=True)):
            motion = np.eye(4)
            motion[:3, :3] = Rotation.random(random_state=rng).as_matrix()
            motion[:3, 3] = rng.uniform(-1, 1, 3) * got.size
            files.append(args.out / f"{seed}_{k:02d}.npy")
            np.save(files[-1], view.astype(np.float64) @ motion[:3, :3].T + motion[:3, 3])
            world.append(pose @ np.linalg.inv(motion))  # the moved view -> the object
        truth = np.linalg.inv(world[0]) @ np.stack(world)
        last = np.load(files[-1])

        row: dict[str, object] = {"seed": seed, "size_m": round(got.size, 3)}
        for name, loop in (("chain", False), ("loop closure", True)):
            start = time.perf_counter()
            res = run_odometry(files, model=None, method="auto", workers=args.workers,
                               progress=False, loop_closure=loop)  # fmt: skip
            out: dict[str, object] = {"placed_all": bool(res.complete),
                                      "wall_s": round(time.perf_counter() - start, 1)}  # fmt: skip
            if res.complete:
                deg, rms = _end_to_start(res.poses, truth, last, rotation_deg)
                out.update(deg=round(deg, 3), mm=round(1000 * rms, 3))
            if loop:
                out["loop_candidates"] = sum(e.kind == "loop" for e in res.edges)
                out["loops_kept"] = sum(e.kind == "loop" and e.kept for e in res.edges)
            row[name] = out
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
