"""``pcreg demo``: register a generated (or the real 3DMatch) pair and write what it found
(:func:`pcreg.demo.run_demo`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pcreg.commands._paths import DEFAULT_SHARED_DATA

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    demo = sub.add_parser(
        "demo", help="register a generated (or the real 3DMatch) pair with the shipped weights"
    )
    demo.add_argument("--out", type=Path, default=Path("demo_out"), help="output directory")
    demo.add_argument(
        "--pair",
        choices=["auto", "synthetic", "real"],
        default="auto",
        help="a room generated now or the real 3DMatch pair in ../shared/data (auto: the "
        "generated room when the model ships, else the real pair)",
    )
    demo.add_argument("--model", default="indoor", help="indoor | PATH")
    demo.add_argument(
        "--method",
        choices=["auto", "geotransformer", "fpfh-ransac"],
        default="auto",
        help="auto: what pcreg register runs by default (the shipped model under its search, its "
        "fallbacks and one verdict) where the weights ship, else FPFH+RANSAC+ICP",
    )
    demo.add_argument(
        "--icp",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="refine with point-to-plane ICP (default, as in pcreg register; --no-icp: off)",
    )
    demo.add_argument("--force", action="store_true", help="replace existing outputs")
    demo.add_argument("--shared-data", type=Path, default=DEFAULT_SHARED_DATA)
    demo.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pcreg.demo import run_demo

    summary = run_demo(
        args.out,
        source=args.pair,
        shared_data=args.shared_data,
        model=args.model,
        method=args.method,
        icp=args.icp,
        force=args.force,
    )
    sys.stdout.write(summary + "\n")
    return 0
