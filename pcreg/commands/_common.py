"""Argument and output helpers shared by the product subcommands."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pcreg._fs import atomic_output, check_writable
from pcreg.api import METHODS

__all__ = ["add_method_arguments", "check_outputs", "write_json"]


def add_method_arguments(cmd: argparse.ArgumentParser, default_model: str | None) -> None:
    """``--model``, ``--method``, ``--icp``, ``--voxel-size``, ``--device``, ``--force``."""
    cmd.add_argument(
        "--model",
        default=default_model,
        help="indoor | outdoor | checkpoint PATH"
        + ("" if default_model else " (default: chosen from the clouds' extent, > 20 m: outdoor)"),
    )
    cmd.add_argument("--method", choices=METHODS, default="geotransformer")
    cmd.add_argument("--icp", action="store_true", help="refine with point-to-plane ICP")
    cmd.add_argument(
        "--voxel-size",
        type=float,
        default=None,
        help="FPFH+RANSAC / ICP voxel in metres (default 0.05 indoor, 0.3 outdoor)",
    )
    cmd.add_argument("--device", default="cpu", help="cpu | cuda (the network)")
    cmd.add_argument("--force", action="store_true", help="replace existing output files")


def check_outputs(paths: list[Path | None], force: bool) -> None:
    """Fail on an existing (without ``force``) or unwritable output before any work."""
    for path in paths:
        if path is not None:
            check_writable(path, overwrite=force)


def write_json(path: Path, record: dict[str, Any], force: bool) -> None:
    with atomic_output(path, overwrite=force) as tmp:
        tmp.write_text(json.dumps(record, indent=1) + "\n")
