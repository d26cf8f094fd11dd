"""``pcreg register SRC REF``: estimate T_ref_src, print it, optionally score, save and draw."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np

from pcreg.commands._common import (
    add_method_arguments,
    add_report_arguments,
    check_kinds,
    check_outputs,
    read_options,
)
from pcreg.commands._paths import file_out, path_in

__all__ = ["add_parser", "format_result", "run"]

logger = logging.getLogger(__name__)


def _units(text: str) -> str:
    """``--units``: a unit of :data:`pcreg.registration.scale.UNITS`, or another spelling
    of one (``m``, ``mm``, ``cm``, ``meters``, ...)."""
    from pcreg.registration.scale import UNITS, unit_name

    name = unit_name(text)
    if name not in UNITS:
        raise argparse.ArgumentTypeError(
            f"unknown unit {text!r}: use one of {', '.join(UNITS)} (or m, mm, cm)"
        )
    return name


def add_parser(sub) -> None:
    cmd = sub.add_parser(
        "register",
        help="register SRC onto REF and print T_ref_src",
        description="Estimate the rigid transform T (4x4) with REF ≈ T @ SRC. Formats: .ply .pcd "
        ".xyz .txt .csv .npy .npz .bin (KITTI) .las .laz .e57 (FILE.e57#K for scan K), ROS bags "
        "(.bag; a ROS 2 bag folder or its .db3 / .mcap), meshes. Coordinates in any "
        "unit: --method auto reads metres, centimetres or millimetres from the clouds (--units "
        "names it), the other methods take metres; the transform is in the input's units, "
        "errors are printed in mm / cm / m, and --json's *_m keys hold metres (georeferenced "
        "offsets are fine). Exit codes: 0 registered, 2 bad input, 3 not registered (the reason "
        "is printed; --out, --render and --report are not written).",
    )
    cmd.add_argument("src", type=path_in, help="source cloud (the one that is moved)")
    cmd.add_argument("ref", type=path_in, help="reference cloud")
    add_method_arguments(cmd, default_model=None)
    cmd.add_argument("--out", type=file_out, help="write T_ref_src as a 4x4 text file")
    cmd.add_argument("--json", action="store_true", help="one JSON object on stdout")
    cmd.add_argument(
        "--gt", type=path_in, help="ground-truth T_ref_src (4x4 text/.npy): report RRE/RTE"
    )
    add_report_arguments(
        cmd, "interactive page of the result: one self-contained file that opens offline"
    )
    cmd.add_argument("--render", type=file_out, metavar="PNG",
                     help="before/after picture with correspondences")  # fmt: skip
    cmd.add_argument("--show", action="store_true", help="open the interactive Open3D window")
    cmd.add_argument(
        "--strict",
        action="store_true",
        help="auto: the registered estimate stands only where the other, independent path "
        "(network search vs FPFH + RANSAC alone) reached the same pose; else the pair is "
        "ambiguous: not registered, exit 3 (slower)",
    )
    cmd.add_argument(
        "--units",
        type=_units,
        default=None,
        metavar="{metres,millimetres,centimetres,object}",
        help="auto: the input's unit (default: read from the clouds' extent and sampling; "
        "--json lists the readings tried with their scores); 'object' registers a scan of "
        "any size as an object",
    )
    cmd.add_argument(
        "--orientation-keep",
        type=float,
        default=None,
        metavar="F",
        help="indoor model: run the orientation hypotheses ranked within F x the best (0-1; "
        "0 = all 24, slower; default: the model's 0.7)",
    )
    cmd.set_defaults(func=run)


def format_result(record: dict, auto: bool = False) -> str:
    """Human-readable summary of a ``--json`` record (``auto``: the model was chosen)."""
    from pcreg.viz.style import format_length, units_text

    matrix = "\n".join("  " + " ".join(f"{v: .6f}" for v in row) for row in record["transform"])
    lines = [
        "registered: "
        + ("yes" if record.get("registered", True) else f"NO ({record.get('reason', '')})"),
        f"method: {record.get('method_used') or record['method']} (model {record['model']}"
        + (", chosen from the clouds' extent" if auto else "")
        + (", + ICP)" if record["icp"] else ")")
        + (
            ", units read as "
            + units_text(record["units"], record.get("object", False), record["scale"])
            if record.get("units", "metres") != "metres" or record.get("object")
            else ""
        ),
        # a refused pair's estimate is labelled so that no script takes it for an answer
        (
            "T_ref_src ="
            if record.get("registered", True)
            else "best estimate, NOT registered (do not use): T_ref_src ="
        )
        + f"\n{matrix}",
        *_rival(record),
        f"{record['num_correspondences']} correspondences, {record['time_s']:.2f} s",
        *(
            f"{name} read as {what}"
            for name, what in zip(
                (record.get("src"), record.get("ref")), record.get("read_as", ()), strict=False
            )
            if what != "points"
        ),
    ]
    if record.get("rre_deg") is not None:
        lines.append(  # the record's _m keys are metres, printed in a readable unit
            f"vs ground truth: RRE {record['rre_deg']:.3f} deg, RTE "
            f"{format_length(record['rte_m'], 4)}, RMSE {format_length(record['rmse_m'], 4)}, "
            f"inlier ratio {record['inlier_ratio']:.3f}"
            + (
                ""
                if record.get("right") is None
                else f"; {'right' if record['right'] else 'WRONG'}: {record['right_criterion']}"
            )
        )
        rmse = record.get("rmse_m")
        if rmse is not None and record["rte_m"] > 100 * max(rmse, 1e-9):  # georeferenced
            lines.append(
                "  (RTE, as the benchmarks define it, is the error at the coordinates' origin, "
                "far from these clouds: RMSE is the error at their points, and --json's "
                "centre_error_m at the source's centre)"
            )
    return "\n".join(lines)


def _rival(record: dict) -> list[str]:
    """The other pose of an ambiguous result, as lines."""
    if not record.get("ambiguous_with"):
        return []
    rows = "\n".join("  " + " ".join(f"{v: .6f}" for v in r) for r in record["ambiguous_with"])
    return [f"nearly as well supported, a different pose =\n{rows}"]


def run(args: argparse.Namespace) -> int:
    from pcreg.api import register_points
    from pcreg.io import read_points, read_transform, write_transform

    model_file = args.model if args.model and Path(args.model).is_file() else None
    check_outputs([args.out, args.render, args.report], args.force,
                  inputs=[args.src, args.ref, args.gt, model_file])  # fmt: skip
    check_kinds(pictures=[args.render], pages=[args.report])
    if args.show:  # before the registration: a window that cannot open fails in milliseconds
        from pcreg.viz.interactive import check_display

        check_display("--show", "--render PNG or --report HTML")
    src, src_info = read_points(args.src, **read_options(args), return_info=True)
    ref, ref_info = read_points(args.ref, **read_options(args), return_info=True)
    gt = read_transform(args.gt) if args.gt is not None else None
    result = register_points(
        src,
        ref,
        args.model,
        method=args.method,
        icp=args.icp,
        voxel_size=args.voxel_size,
        device=args.device,
        names=(str(args.src), str(args.ref)),
        orientation_keep=args.orientation_keep,
        max_memory=args.max_memory,
        strict=args.strict,
        units=args.units,
    )
    result.dropped_invalid = (src_info.dropped_invalid, ref_info.dropped_invalid)
    record = result.to_dict()
    record.update(src=str(args.src), ref=str(args.ref))
    # what each file's points are: "points", or a mesh's vertices or surface sample, a scan
    # of an E57 file, a bag's message (io.ReadInfo.content)
    record.update(read_as=[src_info.content, ref_info.content])
    record.update(rre_deg=None, rte_m=None, rmse_m=None, centre_error_m=None, inlier_ratio=None)
    record.update(right=None, right_criterion=None)
    if gt is not None:
        record.update(result.against(gt, src, ref))
    # the pose's uncertainty (pcreg.registration.information): in --json, where registered
    record.update(information=None, covariance=None, covariance_convention=None)
    if args.json and result.registered:
        record.update(result.uncertainty(src, ref))
    if not result.registered:
        sys.stdout.write(
            (json.dumps(record) if args.json else format_result(record, args.model is None)) + "\n"
        )
        from pcreg.errors import NotRegisteredError

        raise NotRegisteredError(f"{args.src} -> {args.ref}", result.reason)
    from pcreg._fs import output_group

    with output_group():  # --out, --render and --report appear together or not at all
        if args.out is not None:
            write_transform(args.out, result.transform, overwrite=args.force)
            logger.info("wrote %s", args.out)
        if args.render is not None:
            from pcreg.viz import save_alignment_png
            from pcreg.viz.style import format_length, units_text

            title = f"{args.src.name} -> {args.ref.name}: {result.method_used or result.method}"
            if gt is not None:
                title += f", RRE {record['rre_deg']:.2f} deg, RTE {format_length(record['rte_m'])}"
            if result.units != "metres" or result.object:
                title += f"; units: {units_text(result.units, result.object, result.scale)}"
            save_alignment_png(
                args.render,
                src,
                ref,
                result.transform,
                names=(args.src.name, args.ref.name),
                correspondences=(result.src_corr_points, result.ref_corr_points),
                gt=gt,
                radius=result.inlier_radius,
                unit=result.metres_per_unit,
                title=title,
                overwrite=args.force,
            )
            logger.info("wrote %s", args.render)
        if args.report is not None:
            from pcreg.viz.report import result_facts, write_report

            write_report(
                args.report,
                src,
                ref,
                result.transform,
                names=(args.src.name, args.ref.name),
                correspondences=(result.src_corr_points, result.ref_corr_points),
                radius=result.inlier_radius,
                unit=result.metres_per_unit,
                gt=gt,
                facts=result_facts(result, record),
                title=f"{args.src.name} -> {args.ref.name}",
                max_points=args.report_points,
                overwrite=args.force,
            )
            logger.info("wrote %s", args.report)
        # the summary last in the group: a full or closed stdout (exit 2) leaves no output
        sys.stdout.write(
            (json.dumps(record) if args.json else format_result(record, args.model is None)) + "\n"
        )
        sys.stdout.flush()
    if args.show:
        from pcreg.viz.interactive import show_pair

        show_pair(src, ref, np.asarray(result.transform))
    return 0
