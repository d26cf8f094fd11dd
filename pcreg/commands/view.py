"""``pcreg view SRC REF [--transform T]``: look at a pair (interactive or a headless PNG)."""

from __future__ import annotations

import argparse
import logging

import numpy as np

from pcreg.commands._common import (
    add_input_arguments,
    add_report_arguments,
    check_kinds,
    check_outputs,
    read_options,
)
from pcreg.commands._paths import file_out, path_in

__all__ = ["add_parser", "run"]

logger = logging.getLogger(__name__)


def add_parser(sub) -> None:
    cmd = sub.add_parser("view", help="show SRC (moved by --transform) and REF")
    cmd.add_argument("src", type=path_in)
    cmd.add_argument("ref", type=path_in)
    cmd.add_argument(
        "--transform", type=path_in, help="T_ref_src (4x4 text/.npy); default identity"
    )
    cmd.add_argument("--render", type=file_out, metavar="PNG",
                     help="write a picture, no window")  # fmt: skip
    add_report_arguments(
        cmd, "write an interactive page (one self-contained file, opens offline), no window"
    )
    cmd.add_argument(
        "--force", action="store_true", help="replace an existing --render PNG or --report page"
    )
    add_input_arguments(cmd)
    cmd.add_argument(
        "--max-memory",
        default=None,
        metavar="SIZE",
        help="refuse a file whose reading would take more than SIZE, e.g. 8G (default: 4G)",
    )
    cmd.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pcreg.io import read_points, read_transform

    check_outputs([args.render, args.report], args.force,
                  inputs=[args.src, args.ref, args.transform])  # fmt: skip
    check_kinds(pictures=[args.render], pages=[args.report])
    if args.render is None and args.report is None:  # the window: refused before any reading
        from pcreg.viz.interactive import check_display

        check_display("pcreg view", "--render PNG or --report HTML to write a picture")
    from pcreg.registration.checks import MAX_SCALE_RATIO, cloud_extent

    src = read_points(args.src, **read_options(args))
    ref = read_points(args.ref, **read_options(args))
    given = read_transform(args.transform) if args.transform is not None else None
    transform = given if given is not None else np.eye(4)
    extents = sorted([cloud_extent(src), cloud_extent(ref)])
    if extents[0] <= 0 or extents[1] / extents[0] > MAX_SCALE_RATIO:
        logger.warning(
            "the clouds span %.3g and %.3g: scales differ by more than %gx (different units?); "
            "the smaller one may show as a dot",
            cloud_extent(src),
            cloud_extent(ref),
            MAX_SCALE_RATIO,
        )
    moved = src.mean(0) @ transform[:3, :3].T + transform[:3, 3]
    gap = float(np.abs(moved - ref.mean(0)).max())
    if not gap <= 100 * max(extents[1], 1e-9):
        logger.warning(
            "the transform puts the source %.3g away from the reference (they span %.3g): "
            "the pictures show them apart",
            gap,
            extents[1],
        )
    if args.render is not None:
        from pcreg.viz import save_alignment_png

        save_alignment_png(
            args.render,
            src,
            ref,
            given,  # without --transform: one panel, the clouds as given
            names=(args.src.name, args.ref.name),
            title=(
                f"{args.src.name} moved by {args.transform.name} onto {args.ref.name}"
                if given is not None
                else f"{args.src.name} and {args.ref.name} as given"
            ),
            overwrite=args.force,
        )
        logger.info("wrote %s", args.render)
    if args.report is not None:
        from pcreg.viz.report import write_report

        write_report(
            args.report,
            src,
            ref,
            given,
            names=(args.src.name, args.ref.name),
            facts={"transform": str(args.transform) if given is not None else "none (as given)"},
            title=f"{args.src.name} -> {args.ref.name}",
            max_points=args.report_points,
            overwrite=args.force,
        )
        logger.info("wrote %s", args.report)
    if args.render is not None or args.report is not None:
        return 0
    from pcreg.viz.interactive import show_pair

    show_pair(src, ref, transform)
    return 0
