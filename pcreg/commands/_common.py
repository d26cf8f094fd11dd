"""Argument and output helpers shared by the product subcommands."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pcreg._fs import atomic_output, check_writable
from pcreg.api import METHODS
from pcreg.commands._paths import file_out
from pcreg.errors import InputError

__all__ = [
    "add_input_arguments",
    "add_method_arguments",
    "check_kinds",
    "check_not_inputs",
    "check_outputs",
    "nan_policy",
    "positive_int",
    "read_options",
    "write_json",
]


def add_method_arguments(
    cmd: argparse.ArgumentParser,
    default_model: str | None,
    default_method: str = "auto",
    cpu_only: str | None = None,
    force_help: str = "replace existing output files",
) -> None:
    """``--model``, ``--method``, ``--icp``, ``--voxel-size``, ``--device``, ``--max-memory``,
    ``--strict-input``, ``--force``. ``cpu_only``: why the command runs on the CPU alone (its
    ``--device`` help says so instead of offering cuda); ``force_help``: what ``--force``
    replaces."""
    cmd.add_argument(
        "--model",
        default=default_model,
        help="indoor | outdoor | checkpoint PATH"
        + (
            f" (default: {default_model})"
            if default_model
            else " (default: chosen from the clouds' extent, > 20 m: outdoor)"
        ),
    )
    cmd.add_argument(
        "--method",
        choices=METHODS,
        default=default_method,
        help=(
            "auto: the network, with Open3D FPFH + RANSAC where the network's estimate does "
            "not verify, any unit (m, cm, mm) and objects; geotransformer / fpfh-ransac: one "
            "path alone, the input in metres"
            if default_method == "auto"
            else f"(default: {default_method}) geotransformer: the network alone, the scans in "
            "metres; fpfh-ransac: Open3D FPFH + RANSAC alone; auto: the network, with FPFH + "
            "RANSAC where its estimate does not verify, any unit"
        ),
    )
    cmd.add_argument(
        "--icp",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="refine with point-to-plane ICP to convergence (default; --no-icp: the method's "
        "own estimate, 0.03-0.09 s faster and less stable under tiny input changes)",
    )
    cmd.add_argument(
        "--voxel-size",
        type=positive_length,
        default=None,
        help="FPFH+RANSAC / ICP voxel in metres (auto: of the clouds as scaled for the network; "
        "default 0.05 indoor, 0.3 outdoor)",
    )
    cmd.add_argument(
        "--device",
        default="cpu",
        help=f"cpu only: {cpu_only}" if cpu_only else "cpu | cuda (the network)",
    )
    add_input_arguments(cmd)
    cmd.add_argument(
        "--max-memory",
        default=None,
        metavar="SIZE",
        help="refuse a pair whose estimated memory exceeds SIZE, e.g. 8G (default: 4G or 80%% "
        "of the available memory, whichever is less)",
    )
    cmd.add_argument("--force", action="store_true", help=force_help)


def add_input_arguments(cmd: argparse.ArgumentParser) -> None:
    """``--strict-input``: refuse point files with invalid points (NaN/Inf, an organised
    cloud's (0, 0, 0) pixels) instead of dropping them. ``--drop-nonfinite``, the old opt-in
    to dropping, is kept as a hidden no-op: dropping is the default."""
    cmd.add_argument(
        "--strict-input",
        action="store_true",
        help="refuse a point file with invalid points (NaN/Inf, or the (0, 0, 0) pixels of an "
        "organised cloud; default: drop them, with a warning that counts them)",
    )
    cmd.add_argument("--drop-nonfinite", action="store_true", help=argparse.SUPPRESS)


def read_options(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`pcreg.io.read_points` keyword arguments of the command's arguments: the NaN
    policy (``--strict-input``) and, with ``--max-memory``, the memory a read may take."""
    from pcreg.registration.resources import read_cap

    return {
        "nan_policy": nan_policy(args),
        "max_memory": read_cap(getattr(args, "max_memory", None), "--max-memory"),
    }


def nan_policy(args: argparse.Namespace) -> str:
    """The :func:`pcreg.io.read_points` ``nan_policy`` of the command's arguments: ``"error"``
    under ``--strict-input``, else ``"drop"``."""
    return "error" if getattr(args, "strict_input", False) else "drop"


def check_outputs(
    paths: list[Path | None], force: bool, inputs: Sequence[Path | str | None] = ()
) -> None:
    """Fail before any work on an output path named twice, an output that is one of the
    command's ``inputs`` (by path or by file, the file of an address ``FILE#SELECTOR``
    included: never replaced, even with ``force``), an
    existing output (without ``force``), a symbolic link or other non-regular file there, or
    an unwritable one."""
    check_not_inputs(paths, inputs)
    seen: dict[object, Path] = {}
    for path in paths:
        if path is None:
            continue
        keys: list[object] = [_resolved(path)]
        with contextlib.suppress(OSError):  # an existing file: the same one by another name
            st = os.stat(path)
            keys.append((st.st_dev, st.st_ino))
        for key in keys:
            if key in seen:
                first = seen[key]
                also = "" if str(first) == str(path) else f" (also named as {str(first)!r})"
                raise InputError(
                    path, f"named for two outputs{also}; give each output its own path"
                )
        for key in keys:
            seen[key] = path
    for path in paths:
        if path is not None:
            check_writable(path, overwrite=force)


def check_not_inputs(paths: Sequence[Path | None], inputs: Sequence[Path | str | None]) -> None:
    """Fail before any work where an output path is one of the command's ``inputs`` (by path
    or by file, the file of an address ``FILE#SELECTOR`` included): an output never replaces
    an input, even with ``--force``."""
    from pcreg.io import split_address

    sources: dict[object, str] = {}
    for given in inputs:
        if given is None:
            continue
        for path in {Path(given), split_address(given)[0]}:  # the file of ``scans.e57#2`` too
            sources[_resolved(path)] = str(given)
            with contextlib.suppress(OSError):
                st = os.stat(path)
                sources[(st.st_dev, st.st_ino)] = str(given)
    for path in paths:
        if path is None:
            continue
        keys: list[object] = [_resolved(path)]
        with contextlib.suppress(OSError):
            st = os.stat(path)
            keys.append((st.st_dev, st.st_ino))
        for key in keys:
            if key in sources:
                raise InputError(path, f"is an input of this command ({sources[key]}); an "
                                 "output never replaces an input, even with --force")  # fmt: skip


def _resolved(path: Path) -> str:
    try:
        return str(Path(path).resolve())
    except (OSError, RuntimeError):  # a symlink loop: check_writable refuses the link
        return os.path.abspath(path)


def write_json(path: Path, record: dict[str, Any], force: bool) -> None:
    with atomic_output(path, overwrite=force) as tmp:
        tmp.write_text(json.dumps(record, indent=1) + "\n")


def positive_length(text: str) -> float:
    """A length option's value (``--voxel-size``): a finite number above 0, refused by the
    parser with the option's name (the API's own check named ``voxel_size``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of metres, got {text}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


PICTURE_SUFFIXES = (".png",)
PAGE_SUFFIXES = (".html", ".htm")


def check_kinds(pictures: Sequence[Path | None] = (), pages: Sequence[Path | None] = ()) -> None:
    """Refuse, before any work, a ``--render`` path not named ``.png`` or a ``--report`` path
    not named ``.html`` / ``.htm`` (case aside): they are written as PNG and HTML whatever
    their name, so ``pic.jpg`` received PNG bytes. Called after :func:`check_outputs`, whose
    refusals (an input, a name given twice) say more."""
    for paths, suffixes, kind in ((pictures, PICTURE_SUFFIXES, "PNG"),
                                  (pages, PAGE_SUFFIXES, "HTML")):  # fmt: skip
        for path in paths:
            if path is not None and Path(path).suffix.lower() not in suffixes:
                raise InputError(path, f"is written as {kind}: name a {' or '.join(suffixes)} file")


def add_report_arguments(cmd: argparse.ArgumentParser, help_text: str) -> None:
    """``--report HTML`` and ``--report-points N`` (points drawn per cloud)."""
    from pcreg.viz.style import REPORT_POINTS

    cmd.add_argument("--report", type=file_out, metavar="HTML", help=help_text)
    cmd.add_argument(
        "--report-points", type=positive_int, metavar="N", default=REPORT_POINTS,
        help=f"points drawn per cloud in the report, thinned on a grid beyond (default "
        f"{REPORT_POINTS}: all of a 3DMatch fragment; a KITTI scan keeps a quarter)",
    )  # fmt: skip
