"""``pcreg odometry SCANS...``: chain consecutive LiDAR scans into KITTI-format poses."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from pcreg.commands._common import (
    add_method_arguments,
    check_kinds,
    check_outputs,
    nan_policy,
    read_options,
)
from pcreg.commands._paths import file_out, path_in

__all__ = ["add_parser", "run"]

logger = logging.getLogger(__name__)


def add_parser(sub) -> None:
    cmd = sub.add_parser(
        "odometry",
        help="register consecutive scans of a sequence and chain them into poses",
        description="Poses map each scan into the first scan's frame (KITTI poses format: 12 "
        "numbers per line, 3x4 row-major). By default they are in the scanner's own frame (for "
        "KITTI: the Velodyne's), not the left camera's of KITTI's official poses.txt; "
        "--frame camera converts them, P_cam = Tr P_velo inv(Tr) with Tr from calib.txt. "
        "--out also writes OUT.json (05.txt -> 05.txt.json) saying the frame, calibration "
        "and scans. Consecutive pairs run in parallel on Ray (all cores, or --workers / "
        "--address); the motions are chained in order. A pair that does not register breaks the "
        "chain: the scans after it start a new segment whose poses map into its own first "
        "scan's frame; the outputs are written all the same, OUT.json lists the segment of "
        "every scan and the breaks, and the exit code is 3. --loop-closure places the scans "
        "through a map's pose graph instead (pcreg map --sequence --candidates knn: the "
        "consecutive pairs plus each scan's --neighbours best loop candidates by an FPFH "
        "overlap score among the scans "
        "the chain comes back to, its path there at least twice the distance and a tenth of a "
        "scan's diagonal; the graph keeps "
        "the edges that agree): segment 0 holds the scans the graph connects to the first scan, "
        "a scan it cannot place starts a new segment, and OUT.json adds every edge's verdict and "
        "the loops the graph closed.",
    )
    cmd.add_argument(
        "scans", type=path_in, nargs="+", help="scans in time order, a directory of scans or a glob"
    )
    add_method_arguments(cmd, default_model="outdoor", default_method="geotransformer")
    cmd.add_argument(
        "--frame",
        choices=("lidar", "camera"),
        default="lidar",
        help="lidar: poses of the scanner (default); camera: of KITTI's left camera (cam0), "
        "the frame of KITTI's official poses",
    )
    cmd.add_argument(
        "--calib",
        type=path_in,
        default=None,
        metavar="CALIB",
        help="KITTI calib.txt whose Tr: line (Velodyne -> cam0) --frame camera uses (default: "
        "calib.txt beside the scans' directory, as sequences/XX/calib.txt is to velodyne/)",
    )
    cmd.add_argument(
        "--out", type=file_out, default=None,
        help="poses file, and its frame in OUT.json beside it (the poses are printed either way)",
    )  # fmt: skip
    cmd.add_argument(
        "--render", type=file_out, metavar="PNG", help="top-down trajectory over the merged map"
    )
    cmd.add_argument("--json", action="store_true", help="one JSON object on stdout")
    cmd.add_argument(
        "--workers", type=int, default=None,
        help="local Ray cluster CPUs (default: all cores); 1: one by one in this process",
    )  # fmt: skip
    cmd.add_argument("--address", default=None, help="an existing Ray cluster (or RAY_ADDRESS)")
    cmd.add_argument(
        "--loop-closure", action="store_true",
        help="close loops: consecutive pairs plus loop candidates through a pose graph",
    )  # fmt: skip
    cmd.add_argument(
        "--neighbours", type=int, default=3, metavar="K",
        help="with --loop-closure: loop candidates per scan, its K best revisits (scans the "
        "chain comes back to) by an FPFH overlap score (default 3)",
    )  # fmt: skip
    cmd.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from pcreg.data.kitti import read_calib_tr
    from pcreg.errors import InputError, NotRegisteredError
    from pcreg.io import read_points
    from pcreg.odometry import pose_record, run_odometry, scan_list
    from pcreg.odometry_outputs import (
        CONVENTION,
        CONVENTION_LOOP,
        resolve_calib,
        save_trajectory_png,
        sidecar_path,
        write_kitti_poses,
    )

    if args.loop_closure and args.neighbours < 1:
        raise InputError("--neighbours", f"must be at least 1, got {args.neighbours}")
    if args.loop_closure and args.device != "cpu":
        raise InputError("--device", "odometry with --loop-closure registers on the CPU")
    sidecar = None if args.out is None else sidecar_path(args.out)
    args.scans = scan_list(args.scans)
    calib = resolve_calib(args.frame, args.calib, args.scans)
    model_file = args.model if args.model and Path(args.model).is_file() else None
    check_outputs([args.out, sidecar, args.render], args.force,  # never one of the inputs
                  inputs=[*args.scans, calib, model_file])  # fmt: skip
    check_kinds(pictures=[args.render])
    tr = None if calib is None else read_calib_tr(calib)  # a bad file fails before any work
    result = run_odometry(
        args.scans,
        workers=args.workers,
        address=args.address,
        model=args.model,
        method=args.method,
        icp=args.icp,
        voxel_size=args.voxel_size,
        device=args.device,
        max_memory=args.max_memory,
        nan_policy=nan_policy(args),
        progress=sys.stderr.isatty(),  # a bar on a terminal; logs and errors stay one line
        loop_closure=args.loop_closure,
        neighbours=args.neighbours,
    )
    poses = result if tr is None else result.in_camera_frame(tr)
    from pcreg._fs import output_group

    with output_group():  # the poses, their sidecar and the picture, or none of them
        if args.out is not None:
            record = pose_record(poses.frame, calib, args.scans, poses)
            write_kitti_poses(args.out, poses.poses, overwrite=args.force, record=record)
            logger.info("wrote %s and %s (%s frame)", args.out, sidecar, poses.frame)
        if args.render is not None:  # a top-down (x-y) map: the LiDAR frame's z is up
            # only segment 0 shares the first scan's frame: a later one would overlay it wrongly
            first = np.flatnonzero(result.segments == 0).tolist()
            scans = [read_points(args.scans[k], **read_options(args)) for k in first]
            title = f"pcreg odometry ({args.method}, {result.model}): {len(scans)} scans"
            if not result.complete:
                title += f" of {len(args.scans)} (segment 0 only)"
            save_trajectory_png(
                args.render, result.poses[first], scans, title=title, overwrite=args.force
            )
            logger.info("wrote %s", args.render)
    registered = poses.registered.tolist()
    linked = np.isfinite(poses.relative).all(axis=(1, 2))  # both scans in one segment
    if args.json:
        pairs = [
            {"src": str(args.scans[k + 1]), "ref": str(args.scans[k]), "registered": ok,
             "reason": poses.reasons[k] or None, "time_s": float(result.times[k])}
            for k, ok in enumerate(registered)
        ]  # fmt: skip
        if result.edges is not None:  # whether the graph kept each consecutive edge
            kept = {e.src: e for e in result.edges if e.kind == "sequence"}
            for k, pair in enumerate(pairs):
                pair["kept"] = kept[k + 1].kept
                pair["rejected"] = kept[k + 1].rejected or None
        record = {
            "scans": [str(p) for p in args.scans],
            "frame": poses.frame,
            "calib": None if calib is None else str(calib),
            "convention": CONVENTION if result.edges is None else CONVENTION_LOOP,
            "poses": poses.poses.tolist(),
            "relative": [  # null: no motion across a break (the chain: not registered)
                t.tolist() if ok else None for t, ok in zip(poses.relative, linked, strict=True)
            ],
            "time_s": result.times.tolist(),
            "method": args.method,
            "model": result.model,
            "registered": poses.complete,
            "pairs": pairs,
            "segments": poses.segments.tolist(),
            "breaks": poses.breaks(args.scans),
        }
        if result.edges is not None:
            record["loop_closure"] = poses.loop_record(args.scans)
        sys.stdout.write(json.dumps(record) + "\n")
    else:  # 12 numbers a line and nothing else (KITTI's devkit reads no comments)
        rows = poses.poses[:, :3, :4].reshape(len(poses.poses), 12)
        for row in rows:
            sys.stdout.write(" ".join(f"{v:.6e}" for v in row) + "\n")
        steps = np.linalg.norm(poses.relative[:, :3, 3], axis=1)[linked]
        logger.info(
            "%d scans, %s frame, path length %.2f (the scans' units), %.2f s per registration",
            len(rows),
            poses.frame,
            float(steps.sum()),
            float(np.median(result.times)),
        )
    if not poses.complete:  # the outputs are written: now one line on stderr, exit 3
        broken = poses.breaks(args.scans)
        where = "" if args.out is None else f", see {sidecar} for the segment of every scan"
        if result.edges is not None:
            raise NotRegisteredError(
                broken[0]["src"],
                f"{broken[0]['reason']}; the pose graph places {len(broken) + 1} segments of "
                f"{len(registered) + 1} scans, poses map into the first scan of their own "
                f"segment{where}",
            )
        raise NotRegisteredError(
            f"{broken[0]['src']} -> {broken[0]['ref']}",
            f"{broken[0]['reason']}; the odometry chain breaks at {len(broken)} of "
            f"{len(registered)} pairs: {len(broken) + 1} segments, poses after a break map into "
            f"the first scan of their own segment{where}",
        )
    return 0
