"""The shipped networks on a CUDA GPU against the CPU: the same transforms, and the time.

    python tools/gpu_check.py [--data DIR] [--runs 10] [--out FILE.json]

For each real pair (the 3DMatch demo pair 0<-6 with the ``indoor`` model, KITTI 00 95<-94 with
``outdoor``; ``DIR`` holds ``geotransformer_repo/demo`` and ``kitti00_scancontext`` as
``../shared/data`` does) the network alone (no orientation search, no ICP, the torch path) runs
on the CPU and on ``cuda``: the rotation and translation between the two transforms, each one's
errors against the ground truth, and the median wall time of ``--runs`` calls after one
warm-up (``torch.cuda.synchronize()`` around each GPU call). Then the default pipeline
(``pcreg.register``) on ``device="cuda"`` against the CPU on the same pair: the verdict and the
transforms' difference. Needs a CUDA device (exit 2 without one); prints one JSON record per
row. Written for a session that was to be lent a GPU and was not: it ran whole here with
torch's CUDA calls faked onto the CPU (every row, the JSON file), never yet on a GPU.
BENCHMARKS.md, "On a GPU", holds the last GPU measurement (2026-11-26).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _pairs(data: Path) -> list[tuple[str, str, np.ndarray, np.ndarray, np.ndarray]]:
    demo = data / "geotransformer_repo" / "demo"
    out = [("3DMatch 0<-6", "indoor", np.load(demo / "src.npy"), np.load(demo / "ref.npy"),
            np.load(demo / "gt.npy"))]  # fmt: skip
    kitti = data / "kitti00_scancontext"
    meta = json.loads((kitti / "pairs.json").read_text())["pairs"][0]

    def scan(name: str) -> np.ndarray:
        return np.fromfile(kitti / name, np.float32).reshape(-1, 4)[:, :3].astype(np.float64)

    label = f"KITTI {int(meta['ref_file'][:-4])}<-{int(meta['src_file'][:-4])}"
    out.append((label, "outdoor", scan(meta["src_file"]), scan(meta["ref_file"]),
                np.asarray(meta["T_ref_from_src"])))  # fmt: skip
    return out


def _apart(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Rotation (deg) and translation (m) between two ``(4, 4)`` transforms."""
    rel = np.linalg.inv(a) @ b
    cos = np.clip((np.trace(rel[:3, :3]) - 1) / 2, -1.0, 1.0)
    return float(np.degrees(np.arccos(cos))), float(np.linalg.norm(rel[:3, 3]))


def _timed(fn, runs: int, cuda: bool):
    import torch

    fn()  # warm-up
    times, out = [], None
    for _ in range(runs):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    import torch

    import pcreg
    from pcreg.registration.loading import load_network

    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    rows: list[dict] = []

    def emit(row: dict) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)

    def compare(name: str, what: str, cpu: np.ndarray, cuda: np.ndarray) -> None:
        deg, metres = _apart(cpu, cuda)
        emit({"pair": name, "what": f"{what} cuda vs cpu", "deg": deg, "m": metres})

    emit({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
          "cuda": torch.version.cuda})  # fmt: skip
    for name, model, src, ref, gt in _pairs(args.data):
        preds = {}
        for device in ("cpu", "cuda"):
            net = load_network(model, device).network
            pred, median = _timed(
                lambda net=net, src=src, ref=ref: net(src, ref), args.runs, device == "cuda"
            )
            preds[device] = pred
            rre, rte = _apart(pred.transform, gt)
            row = {"pair": name, "model": model, "what": "network", "device": device,
                   "backend": getattr(net, "backend", None), "median_s": round(median, 4),
                   "rre_deg": round(rre, 4), "rte_m": round(rte, 5),
                   "correspondences": len(pred.corr_scores)}  # fmt: skip
            emit(row)
        compare(name, "network", preds["cpu"].transform, preds["cuda"].transform)
        results = {}
        for device in ("cpu", "cuda"):
            res, median = _timed(lambda d=device, s=src, r=ref: pcreg.register(s, r, device=d), 3,
                                 device == "cuda")  # fmt: skip
            results[device] = res
            rre, rte = _apart(res.transform, gt)
            row = {"pair": name, "what": "pcreg.register", "device": device,
                   "registered": bool(res.registered), "median_s": round(median, 4),
                   "rre_deg": round(rre, 4), "rte_m": round(rte, 5)}  # fmt: skip
            emit(row)
        compare(name, "pcreg.register", results["cpu"].transform, results["cuda"].transform)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
