"""``pcreg benchmark``: run benchmark sections of :mod:`pcreg.bench` and replace their tables in
``BENCHMARKS.md``."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from pcreg.commands._common import positive_int
from pcreg.commands._paths import DEFAULT_SHARED_DATA

__all__ = ["add_parser", "run"]

# the log lines keep the ``pcreg`` logger name they have always had
logger = logging.getLogger("pcreg")
QUICK_BRUTE_FORCE_MAX = 20_000  # points; the brute-force neighbor search above it is skipped


def add_parser(sub) -> None:
    bench = sub.add_parser(
        "benchmark",
        help="every benchmark section (or one: --model, --pipeline, ...) into BENCHMARKS.md",
    )
    bench.add_argument(
        "--quick",
        action="store_true",
        help="neighbor search (no KeOps; brute force at 20k points only) and grid subsampling "
        "only (under a minute on a 2-core CPU: 36 s measured, machine shared)",
    )
    bench.add_argument("--subsampling", action="store_true", help="grid subsampling vs Open3D only")
    bench.add_argument(
        "--model",
        action="store_true",
        help="time the registration network on the real demo pair instead",
    )
    bench.add_argument(
        "--registration",
        action="store_true",
        help="success rates of the shipped models vs FPFH+RANSAC (real + synthetic pairs)",
    )
    bench.add_argument(
        "--pipeline",
        action="store_true",
        help="end-to-end latency, peak memory and batch throughput vs FPFH+RANSAC (real pairs)",
    )
    bench.add_argument(
        "--busy",
        action="store_true",
        help="pcreg in-process and whole process, idle and beside two CPU-bound processes, vs "
        "KISS-Matcher (real pairs; --pipeline runs it too)",
    )
    bench.add_argument(
        "--zero-shot",
        action="store_true",
        help="the default register on objects (bunny, dragon, also in mm), TUM RGB-D, 3DMatch and "
        "KITTI under random rotations vs FPFH+RANSAC and KISS-Matcher (pip install kiss-matcher)",
    )
    bench.add_argument(
        "--covariance",
        action="store_true",
        help="how often the pose covariance's 95 %% ellipsoid holds the true pose: generated "
        "pairs and the KITTI training sweeps (its calibration sets) and the zero-shot scans "
        "(--draws, default 1)",
    )
    bench.add_argument(
        "--no-peers", action="store_true", help="--zero-shot: pcreg alone (no peer columns)"
    )
    bench.add_argument(
        "--draws",
        type=positive_int,
        default=None,
        help="random motions per pair (10; --zero-shot: 3)",
    )
    bench.add_argument("--indoor-model", default="indoor", help="name, PATH or none")
    bench.add_argument("--outdoor-model", default="outdoor", help="name, PATH or none")
    bench.add_argument("--synthetic-indoor", type=Path, help="generated indoor dataset root")
    bench.add_argument("--synthetic-outdoor", type=Path, help="generated outdoor dataset root")
    bench.add_argument(
        "--limit", type=positive_int, default=40, help="synthetic pairs per overlap bin"
    )
    bench.add_argument("--no-icp", action="store_true", help="skip the 'model + ICP' column")
    bench.add_argument("--runs", type=positive_int, default=5, help="timed runs per case (median)")
    bench.add_argument("--radius", type=float, default=0.5, help="radius search radius, metres")
    bench.add_argument("--cap", type=positive_int, default=32, help="radius search neighbor cap")
    bench.add_argument(
        "--output",
        type=Path,
        default=Path("BENCHMARKS.md"),
        help="Markdown file whose sections are replaced",
    )
    bench.add_argument("--shared-data", type=Path, default=DEFAULT_SHARED_DATA)
    bench.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """One section when a section flag is given; ``--quick``: neighbor search and grid
    subsampling; otherwise every section (``make bench``), skipping those whose data or models
    are absent with a warning."""
    _check_arguments(args)
    if args.zero_shot:
        return _benchmark_zero_shot(args)
    if args.covariance:
        return _benchmark_covariance(args)
    if args.registration:
        return _benchmark_registration(args)
    if args.busy:
        return _benchmark_busy(args)
    if args.pipeline:
        _benchmark_pipeline(args)
        return _benchmark_busy(args)
    if args.model:
        return _benchmark_model(args)
    if args.subsampling:
        return _benchmark_subsampling(args)
    _benchmark_neighbors(args)
    _benchmark_subsampling(args)
    if args.quick:
        return 0
    from pcreg.errors import InputError

    sections = (_benchmark_model, _benchmark_pipeline, _benchmark_busy, _benchmark_registration)
    for section in sections:
        if section in (_benchmark_pipeline, _benchmark_registration):
            missing = [m for m in (args.indoor_model, args.outdoor_model) if not _model_exists(m)]
            if missing:
                logger.warning("%s: skipping models that do not exist: %s", section.__name__,
                               ", ".join(missing))  # fmt: skip
                args.indoor_model = "none" if args.indoor_model in missing else args.indoor_model
                args.outdoor_model = "none" if args.outdoor_model in missing else args.outdoor_model
        try:
            section(args)
        except InputError as exc:  # absent shared data: the section cannot run here
            logger.warning("skipping %s: %s", section.__name__, exc)
    return 0


def _model_exists(model: str) -> bool:
    from pcreg.errors import InputError
    from pcreg.registration.loading import weights_path

    if model == "none":
        return True
    try:
        return weights_path(model).exists()
    except InputError:  # unknown name, weights not in this build, missing checkpoint
        return False


def _models(args: argparse.Namespace) -> dict[str, str]:
    """``{"indoor": ..., "outdoor": ...}`` without the settings given as ``none``."""
    return {
        setting: value
        for setting, value in (("indoor", args.indoor_model), ("outdoor", args.outdoor_model))
        if value != "none"
    }


def _command(args: argparse.Namespace) -> str:
    return "pcreg " + " ".join(args.argv)


def _emit(args: argparse.Namespace, section: str, table: str) -> int:
    """Print a benchmark table and replace its section of ``--output``."""
    from pcreg.bench.report import replace_section

    sys.stdout.write(table + "\n")
    if args.output is not None:
        replace_section(args.output, section, table)
        logger.info("wrote the %s table into %s", section, args.output)
    return 0


def _benchmark_neighbors(args: argparse.Namespace) -> int:
    from pcreg.bench.neighbors import (
        benchmark_neighbors,
        format_neighbor_table,
        load_benchmark_cloud,
    )

    cloud, source = load_benchmark_cloud(args.shared_data if args.shared_data.is_dir() else None)
    results = benchmark_neighbors(
        cloud,
        radius=args.radius,
        cap=args.cap,
        runs=args.runs,
        # --quick: brute force (torch) at 20k points only; at 100k it alone takes minutes
        brute_force_max=QUICK_BRUTE_FORCE_MAX if args.quick else None,
    )
    table = format_neighbor_table(
        results, source=source, radius=args.radius, cap=args.cap, command=_command(args)
    )
    return _emit(args, "neighbors", table)


def _benchmark_subsampling(args: argparse.Namespace) -> int:
    from pcreg.bench.neighbors import load_benchmark_cloud
    from pcreg.bench.subsample import benchmark_subsampling, format_subsample_table

    cloud, source = load_benchmark_cloud(args.shared_data if args.shared_data.is_dir() else None)
    results = benchmark_subsampling(cloud, runs=args.runs)
    table = format_subsample_table(results, source=source, command=_command(args))
    return _emit(args, "subsampling", table)


def _benchmark_model(args: argparse.Namespace) -> int:
    from pcreg.bench.model import benchmark_model, format_model_table
    from pcreg.errors import MissingFileError

    if not (args.shared_data / "geotransformer_repo" / "demo").is_dir():
        raise MissingFileError(args.shared_data, "the model benchmark needs the demo pair")
    results = benchmark_model(args.shared_data, runs=args.runs)
    return _emit(args, "model", format_model_table(results, _command(args)))


def _benchmark_pipeline(args: argparse.Namespace) -> int:
    from pcreg.bench.pipeline import benchmark_pipeline, format_pipeline_tables
    from pcreg.errors import MissingFileError

    if not args.shared_data.is_dir():
        raise MissingFileError(args.shared_data, "the pipeline benchmark needs the real pairs")
    results = benchmark_pipeline(args.shared_data, _models(args), runs=args.runs)
    return _emit(args, "pipeline", format_pipeline_tables(results, _command(args)))


def _benchmark_busy(args: argparse.Namespace) -> int:
    from pcreg.bench.busy import benchmark_busy, format_busy_table
    from pcreg.errors import MissingFileError

    if not args.shared_data.is_dir():
        raise MissingFileError(args.shared_data, "the busy-machine benchmark needs the real pairs")
    results = benchmark_busy(args.shared_data, runs=args.runs)
    return _emit(args, "busy", format_busy_table(results, _command(args)))


def _benchmark_zero_shot(args: argparse.Namespace) -> int:
    from pcreg.bench.zero_shot import format_zero_shot_table, run_zero_shot, zero_shot_cases
    from pcreg.errors import InputError

    cases = zero_shot_cases(args.shared_data, draws=args.draws or 3)
    if not cases:
        raise InputError(args.shared_data, "no zero-shot data here or in ../train_data")
    rows = run_zero_shot(cases, with_peers=not args.no_peers)
    return _emit(args, "zero-shot", format_zero_shot_table(rows, _command(args)))


def _benchmark_covariance(args: argparse.Namespace) -> int:
    from pcreg.bench.covariance import (
        format_coverage_table,
        generated_cases,
        kitti_training_cases,
        measure,
    )
    from pcreg.bench.zero_shot import zero_shot_cases

    generated = measure(generated_cases())
    sets = {  # the generated streets check the outdoor floor the KITTI sweeps fit
        "generated (calibration)": [s for s in generated if s.group != "outdoor"],
        "KITTI training (calibration)": measure(kitti_training_cases(args.shared_data)),
        "generated (check)": [s for s in generated if s.group == "outdoor"],
    }
    sets = {name: samples for name, samples in sets.items() if samples}
    real = zero_shot_cases(args.shared_data, draws=args.draws or 1)
    if real:
        sets["real scans (check)"] = measure(real)
    else:
        logger.warning("no zero-shot data under %s: generated pairs only", args.shared_data)
    return _emit(args, "covariance", format_coverage_table(sets, _command(args)))


def _benchmark_registration(args: argparse.Namespace) -> int:
    from pcreg.bench.registration import (
        default_methods,
        format_registration_table,
        real_cases,
        run_cases,
        synthetic_cases,
    )
    from pcreg.errors import InputError

    cases = (
        real_cases(args.shared_data, draws=args.draws or 10) if args.shared_data.is_dir() else []
    )
    for setting, root in (("indoor", args.synthetic_indoor), ("outdoor", args.synthetic_outdoor)):
        if root is not None:
            cases += synthetic_cases(root, setting, limit=args.limit)
    if not cases:
        raise InputError(
            args.shared_data, "no benchmark cases: shared data and synthetic sets absent"
        )
    outcomes = run_cases(cases, default_methods(_models(args), icp=not args.no_icp))
    return _emit(args, "registration", format_registration_table(outcomes, _command(args)))


def _check_arguments(args: argparse.Namespace) -> None:
    """Before any work: a model given by path must exist (a default name whose weights are
    absent is skipped with a warning instead), the radius be positive, and ``--output`` be
    writable and none of the inputs."""
    import math

    from pcreg._fs import check_writable
    from pcreg.commands._common import check_not_inputs
    from pcreg.errors import InputError
    from pcreg.registration.shipped import SHIPPED_MODELS, weights_path

    models = [
        weights_path(value)  # a path that is not there: said so now
        for value in (args.indoor_model, args.outdoor_model)
        if value and value != "none" and value not in SHIPPED_MODELS
    ]
    if not (math.isfinite(args.radius) and args.radius > 0):
        raise InputError("--radius", f"must be a positive number of metres, got {args.radius}")
    check_not_inputs([args.output], models)
    check_writable(args.output, overwrite=True)
