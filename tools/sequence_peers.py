"""Sequences side by side (issue #45): chained ``pcreg odometry``, ``pcreg odometry
--loop-closure`` and KISS-ICP (PyPI ``kiss-icp``, the ``bench`` extra) on the KITTI excerpts of
``kitti_seq00-07_semantickitti_mini`` (frames 0, 3, 6, 9, and 15 for 00) and the three TUM
fr1/xyz depth frames of ``tum_fr1xyz_depth_pairs`` (in time order), scored by evo's APE
(translation RMSE, metres, no alignment: every trajectory and the ground truth start at the
identity in the first scan's frame, as ``evo_ape kitti GT EST`` without ``-a``).

    python tools/sequence_peers.py ../shared/train_data [--workers 1] [--sequences 00 05]

Ground truth: KITTI's ``poses.txt`` (SemanticKITTI, cam0) moved to the Velodyne frame,
``V_k = inv(Tr) P_k Tr``; TUM's motion-capture ``T_world_cam`` (the last frame's label is
``case_1``'s, t = .2758; ``case_2`` labels the same depth image .3058, 7.7 mm away: the folder's
README). pcreg: KITTI with the outdoor network (``method="geotransformer"``), TUM with
``method="auto"``; KISS-ICP: its defaults, ``max_range`` 100 m (KITTI) or 5 m (TUM), no deskew
(the sweeps have no per-point times). Prints one JSON line per sequence and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

KITTI = "kitti_seq00-07_semantickitti_mini"
TUM = "tum_fr1xyz_depth_pairs"


def _kitti(root: Path, name: str) -> tuple[list[Path], np.ndarray]:
    """The scans of sequence ``name`` and their Velodyne poses ``(K, 4, 4)`` T_first_k."""
    from pcreg.data.kitti import read_calib_tr

    folder = root / KITTI / "sequences" / name
    scans = sorted((folder / "velodyne").glob("*.bin"))
    cam = np.loadtxt(folder / "poses.txt").reshape(-1, 3, 4)
    tr = read_calib_tr(folder / "calib.txt")
    velo = [np.linalg.inv(tr) @ np.vstack([cam[int(p.stem)], [0, 0, 0, 1]]) @ tr for p in scans]
    return scans, np.linalg.inv(velo[0]) @ np.stack(velo)


def _tum(root: Path, out: Path) -> tuple[list[Path], np.ndarray]:
    """The three TUM depth frames in time order, back-projected to ``.npy`` (metres, camera
    frame), and their motion-capture poses T_first_k."""
    import open3d as o3d
    from scipy.spatial.transform import Rotation

    folder = root / TUM
    frames = [  # (depth image, its pose label) in time order: .1658, .2159, .2758
        ("case_2/dep_prev.png", "case_2/pose_prev.txt"),
        ("case_1/dep_prev.png", "case_1/pose_prev.txt"),
        ("case_1/dep_curr.png", "case_1/pose_curr.txt"),
    ]
    scans, poses = [], []
    for k, (image, label) in enumerate(frames):
        depth = np.asarray(o3d.io.read_image(str(folder / image)), np.float64) / 5000.0
        v, u = np.nonzero(depth > 0)
        z = depth[v, u]
        cloud = np.column_stack([(u - 319.5) * z / 525.0, (v - 239.5) * z / 525.0, z])
        scans.append(out / f"{k}.npy")
        np.save(scans[-1], cloud.astype(np.float32))
        t = np.array((folder / label).read_text().split(), float)
        pose = np.eye(4)
        pose[:3, :3] = Rotation.from_quat(t[3:]).as_matrix()
        pose[:3, 3] = t[:3]
        poses.append(pose)
    return scans, np.linalg.inv(poses[0]) @ np.stack(poses)


def _kiss(scans: list[Path], max_range: float) -> tuple[np.ndarray, float]:
    """KISS-ICP's poses ``(K, 4, 4)`` (scan k -> scan 0) and its wall seconds."""
    from kiss_icp.config import KISSConfig
    from kiss_icp.kiss_icp import KissICP

    from pcreg.io import read_points

    config = KISSConfig()
    config.data.max_range = max_range
    config.data.deskew = False
    config.mapping.voxel_size = max_range / 100  # KISS-ICP's own default: max_range / 100
    odometry = KissICP(config)
    clouds = [np.asarray(read_points(p), np.float64) for p in scans]
    start = time.perf_counter()
    poses = []
    for cloud in clouds:
        odometry.register_frame(cloud, np.zeros(0))
        poses.append(np.array(odometry.last_pose))
    return np.linalg.inv(poses[0]) @ np.stack(poses), time.perf_counter() - start


def _ape(poses: np.ndarray, truth: np.ndarray) -> float:
    """evo's APE, translation part, RMSE (metres), no alignment."""
    from evo.core.metrics import PoseRelation
    from evo.core.trajectory import PosePath3D
    from evo.main_ape import ape

    result = ape(
        PosePath3D(poses_se3=list(truth)), PosePath3D(poses_se3=list(poses)),
        PoseRelation.translation_part, align=False, correct_scale=False,
    )  # fmt: skip
    return float(result.stats["rmse"])


def _pcreg(scans, truth, loop: bool, workers: int, **kw) -> dict[str, object]:
    from pcreg.odometry import run_odometry

    start = time.perf_counter()
    res = run_odometry(scans, workers=workers, progress=False, loop_closure=loop, **kw)
    wall = time.perf_counter() - start
    row: dict[str, object] = {"segments": int(res.segments.max()) + 1, "wall_s": round(wall, 1)}
    row["ape_m"] = _ape(res.poses, truth) if res.complete else None  # frames differ otherwise
    if loop:
        row["kept"] = sum(e.kept for e in res.edges)
        row["pairs"] = len(res.edges)
        row["loops_kept"] = sum(e.kept and e.kind == "loop" for e in res.edges)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("train_data", type=Path)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--sequences", nargs="*", default=[f"{k:02d}" for k in range(8)])
    parser.add_argument("--no-tum", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    tmp = Path(tempfile.mkdtemp(prefix="sequence_peers_"))
    outdoor = {"model": "outdoor", "method": "geotransformer"}
    cases = [(f"KITTI {s}", *_kitti(args.train_data, s), 100.0, outdoor) for s in args.sequences]
    if not args.no_tum:
        tum = _tum(args.train_data, tmp)
        cases.append(("TUM fr1/xyz", *tum, 5.0, {"model": None, "method": "auto"}))
    rows = []
    for name, scans, truth, max_range, kw in cases:
        row = {"sequence": name, "scans": len(scans),
               "path_m": float(np.linalg.norm(np.diff(truth[:, :3, 3], axis=0), axis=1).sum()),
               "end_to_start_m": float(np.linalg.norm(truth[-1, :3, 3]))}  # fmt: skip
        row["chain"] = _pcreg(scans, truth, False, args.workers, **kw)
        row["loop"] = _pcreg(scans, truth, True, args.workers, **kw)
        kiss, wall = _kiss(scans, max_range)
        row["kiss_icp"] = {"ape_m": _ape(kiss, truth), "wall_s": round(wall, 2)}
        print(json.dumps(row), flush=True)
        rows.append(row)

    def ape(r):
        return "broken" if r["ape_m"] is None else f"{100 * r['ape_m']:.2f} cm"

    print("\n| sequence | scans | path | chained odometry | --loop-closure (edges kept, loops) "
          "| KISS-ICP | wall s (chain / loop / KISS) |")  # fmt: skip
    print("|---|---:|---:|---|---|---|---|")
    for r in rows:
        c, g, k = r["chain"], r["loop"], r["kiss_icp"]
        print(f"| {r['sequence']} | {r['scans']} | {r['path_m']:.2f} m | {ape(c)} | {ape(g)} "
              f"({g['kept']} of {g['pairs']}, {g['loops_kept']}) | {ape(k)} | "
              f"{c['wall_s']} / {g['wall_s']} / {k['wall_s']} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
