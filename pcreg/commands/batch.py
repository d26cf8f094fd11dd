"""``pcreg batch MANIFEST --out DIR`` (every pair of a manifest, on Ray, resumable) and
``pcreg manifest`` (a dataset's pairs as a manifest)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from pcreg.commands._common import add_method_arguments, check_not_inputs, nan_policy
from pcreg.commands._paths import file_out, path_in

__all__ = ["add_parser", "run", "run_manifest"]

logger = logging.getLogger(__name__)


def add_parser(sub) -> None:
    cmd = sub.add_parser(
        "batch",
        help="register every pair of a manifest on Ray (resumable)",
        description="MANIFEST: .csv or .jsonl with src, ref and optional id and gt (T_ref_src: "
        "a 4x4 file, or 16 numbers in JSON Lines). Writes DIR/results.jsonl (one line per pair, "
        "appended as pairs finish; the same command again skips the pairs already run (registered "
        "or not) and "
        "tries failed ones again; --force starts over) and DIR/summary.json. Exit code 4 when a "
        "pair failed (an error, no result; a pair that ran but did not register is a result). "
        "Runs on a local Ray cluster with one worker per core, or on an existing one with "
        "--address / RAY_ADDRESS.",
    )
    cmd.add_argument("manifest", type=path_in)
    cmd.add_argument("--out", type=path_in, required=True, help="results directory")
    add_method_arguments(
        cmd,
        default_model=None,
        cpu_only="the workers register on the CPU",
        force_help="start over: replace DIR's results.jsonl and summary.json instead of "
        "resuming from them",
    )
    cmd.add_argument(
        "--address",
        default=None,
        help="an existing Ray cluster, e.g. ray://HOST:10001 or HOST:6379",
    )
    cmd.add_argument(
        "--workers", type=int, default=None, help="local cluster: CPUs to use (default: all)"
    )
    cmd.set_defaults(func=run)

    man = sub.add_parser(
        "manifest",
        help="write a dataset's pairs (with ground truth) as a manifest for pcreg batch",
        description="ROOT: a 3DMatch-layout root (metadata/<benchmark>) or a KITTI odometry root.",
    )
    man.add_argument("root", type=path_in)
    man.add_argument("--layout", choices=("threedmatch", "kitti"), default="threedmatch")
    man.add_argument(
        "--benchmark", default=None,
        help="3DMatch metadata name (default 3DMatch) or KITTI split (default test)",
    )  # fmt: skip
    man.add_argument("--out", type=file_out, required=True, help="manifest .jsonl to write")
    man.add_argument("--force", action="store_true", help="replace an existing manifest")
    man.set_defaults(func=run_manifest)


def run(args: argparse.Namespace) -> int:
    from pcreg._fs import check_writable
    from pcreg.batch.manifest import read_manifest
    from pcreg.batch.results import format_summary
    from pcreg.batch.run import run_batch
    from pcreg.batch.runner import BatchOptions
    from pcreg.engine.heap import retaining
    from pcreg.errors import InputError, PairsFailedError

    if args.device != "cpu":
        raise InputError("--device", "pcreg batch runs its workers on the CPU")
    pairs = read_manifest(args.manifest)
    # results.jsonl is appended to, summary.json replaced: never an input, never a link
    outputs = [args.out / "results.jsonl", args.out / "summary.json"]
    model_file = args.model if args.model and Path(args.model).is_file() else None
    files = [args.manifest, model_file, *(p.src for p in pairs), *(p.ref for p in pairs)]
    check_not_inputs(outputs, files)
    if args.out.is_dir():
        for path in outputs:
            check_writable(path, overwrite=True)
    options = BatchOptions(
        model=args.model,
        method=args.method,
        icp=args.icp,
        voxel_size=args.voxel_size,
        retain_heap=retaining(),
        max_memory=args.max_memory,
        nan_policy=nan_policy(args),
    )
    summary = run_batch(
        pairs,
        args.out,
        options,
        address=args.address,
        workers=args.workers,
        overwrite=args.force,
        progress=sys.stderr.isatty(),  # a bar on a terminal; captured stderr stays clean
    )
    sys.stdout.write(format_summary(summary, new=summary["new"]) + "\n")
    logger.info("wrote %s and %s", args.out / "results.jsonl", args.out / "summary.json")
    if summary["failed"]:  # a pipeline must not take a run with lost pairs for a whole one
        raise PairsFailedError(args.manifest, summary["failed"], summary["pairs"],
                               summary["first_error"], args.out / "results.jsonl")  # fmt: skip
    return 0


def run_manifest(args: argparse.Namespace) -> int:
    from pcreg.batch.manifest import dataset_manifest, write_manifest

    pairs = dataset_manifest(args.root, args.layout, args.benchmark)
    write_manifest(pairs, args.out, overwrite=args.force)
    logger.info("wrote %d pairs to %s", len(pairs), args.out)
    return 0
