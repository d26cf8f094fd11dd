"""``pcreg map SCANS... --out DIR``: place many scans in one frame over a pose graph."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from pcreg.commands._common import add_method_arguments, nan_policy
from pcreg.commands._paths import path_in

__all__ = ["add_parser", "run"]

logger = logging.getLogger(__name__)


def add_parser(sub) -> None:
    cmd = sub.add_parser(
        "map",
        help="place many scans in one frame: pairwise registrations and a pose graph",
        description="Registers candidate pairs of the scans (every pair of an unordered set, "
        "or with --sequence consecutive scans and loop-closure candidates; --candidates knn "
        "keeps each scan's best partners by an FPFH overlap score), keeps the edges a pose "
        "graph (Open3D, Levenberg-Marquardt with a line process) finds consistent and writes "
        "into DIR: poses.txt (KITTI layout, one line of 12 numbers per scan in the order "
        "given, T_world_scan, the world being the first scan's frame; an unplaced scan's "
        "line is 12 nan), poses.txt.json (frame, every edge with its verdict and whether the "
        "graph kept it, the unplaced scans), map.ply (the merged map, one colour per scan), "
        "map.png and report.html. A scan no kept edge reaches is unplaced, never guessed: "
        "the outputs are written all the same and the exit code is 3.",
    )
    cmd.add_argument(
        "scans", type=path_in, nargs="+", help="scans (any format register reads), directories "
        "of scans or globs; in time order with --sequence",
    )  # fmt: skip
    cmd.add_argument("--out", type=path_in, required=True, metavar="DIR", help="output directory")
    add_method_arguments(cmd, default_model=None, cpu_only="the pairs register on the CPU")
    cmd.add_argument(
        "--sequence", action="store_true",
        help="the scans are in time order: consecutive pairs plus loop-closure candidates",
    )  # fmt: skip
    cmd.add_argument(
        "--candidates", choices=("all", "knn"), default="all",
        help="all: every pair (default); knn: each scan's --neighbours best partners by an "
        "FPFH mutual-nearest-neighbour overlap score (with --sequence: the loop candidates, "
        "among the scans the chained consecutive pairs come back to)",
    )  # fmt: skip
    cmd.add_argument("--neighbours", type=int, default=5, metavar="K",
                     help="partners per scan with --candidates knn (default 5)")  # fmt: skip
    cmd.add_argument("--map-voxel", type=float, default=None, metavar="SIZE",
                     help="map.ply voxel in the input's units (default: the registrations' "
                     "ICP voxel)")  # fmt: skip
    cmd.add_argument("--json", action="store_true", help="the sidecar record on stdout")
    cmd.add_argument(
        "--workers", type=int, default=None,
        help="local Ray cluster CPUs (default: all cores); 1: one pair after another in "
        "this process",
    )  # fmt: skip
    cmd.add_argument("--address", default=None, help="an existing Ray cluster (or RAY_ADDRESS)")
    cmd.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from pcreg.api import map as build
    from pcreg.batch.runner import check_cluster_arguments
    from pcreg.commands._common import check_outputs
    from pcreg.errors import InputError, NotRegisteredError
    from pcreg.io_formats.listing import scan_list
    from pcreg.mapping.outputs import check_out_dir

    if args.device != "cpu":
        raise InputError("--device", "pcreg map registers its pairs on the CPU")
    if args.neighbours < 1:
        raise InputError("--neighbours", f"must be at least 1, got {args.neighbours}")
    if args.map_voxel is not None and not args.map_voxel > 0:
        raise InputError("--map-voxel", f"must be a positive size, got {args.map_voxel}")
    check_cluster_arguments(args.address, args.workers)
    scans = scan_list(args.scans)
    if len(scans) < 2:
        raise InputError("scans", f"a map needs at least two scans, got {len(scans)}")
    paths = check_out_dir(args.out, overwrite=args.force)
    check_outputs(  # an output is never one of the scans
        [p for p in paths.values() if p.parent.is_dir()], args.force, inputs=scans
    )

    def summary(result) -> None:
        """The poses on stdout, before the files are written: a full or closed stdout (exit
        2) leaves no map behind."""
        if args.json:
            sys.stdout.write(json.dumps(result.record()) + "\n")
        else:
            for name, pose, ok in zip(result.names, result.poses, result.placed, strict=True):
                where = "unplaced" if not ok else " ".join(f"{v:.6e}" for v in pose[:3, :4].ravel())
                sys.stdout.write(f"{name}\t{where}\n")
        sys.stdout.flush()

    result = build(
        scans, args.out, args.model, method=args.method, icp=args.icp,
        voxel_size=args.voxel_size, sequence=args.sequence, candidates=args.candidates,
        neighbours=args.neighbours, workers=args.workers, address=args.address,
        max_memory=args.max_memory, nan_policy=nan_policy(args), map_voxel=args.map_voxel,
        overwrite=args.force, progress=sys.stderr.isatty(), before_writing=summary,
    )  # fmt: skip
    kept = sum(e.kept for e in result.edges)
    logger.info(
        "%d of %d scans placed; %d candidate pairs, %d registered, %d kept by the graph; "
        "wrote %s", int(result.placed.sum()), len(scans), len(result.edges),
        sum(e.registered for e in result.edges), kept, args.out,
    )  # fmt: skip
    if not result.complete:  # the outputs are written: now one line on stderr, exit 3
        first = int(np.flatnonzero(~result.placed)[0])
        missing = int((~result.placed).sum())
        raise NotRegisteredError(
            result.names[first],
            f"the map could not place it: {result.unplaced[first]} ({missing} of "
            f"{len(scans)} scans unplaced, see {args.out / 'poses.txt.json'})",
        )
    return 0
