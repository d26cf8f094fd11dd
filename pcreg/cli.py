"""The ``pcreg`` command line (argparse; heavy imports happen inside the subcommands).

Exit codes: 0 ok, 2 bad input (the message names the file and the problem), 1 internal error.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

__all__ = ["main"]

logger = logging.getLogger("pcreg")

#: ``../shared/data`` beside a source checkout; $PCREG_SHARED_DATA overrides it.
DEFAULT_SHARED_DATA = Path(
    os.environ.get(
        "PCREG_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"
    )
)


def _cmd_benchmark(args: argparse.Namespace) -> int:
    """One section when a section flag is given; ``--quick``: neighbor search and grid
    subsampling; otherwise every section (``make bench``), skipping those whose data or models
    are absent with a warning."""
    if args.registration:
        return _benchmark_registration(args)
    if args.pipeline:
        return _benchmark_pipeline(args)
    if args.model:
        return _benchmark_model(args)
    if args.subsampling:
        return _benchmark_subsampling(args)
    _benchmark_neighbors(args)
    _benchmark_subsampling(args)
    if args.quick:
        return 0
    from pcreg.errors import InputError

    for section in (_benchmark_model, _benchmark_pipeline, _benchmark_registration):
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
    from pcreg.weights import weights_path

    if model == "none":
        return True
    try:
        return weights_path(model).exists()
    except InputError:  # unknown name, weights not in this build, missing checkpoint
        return False


def _benchmark_neighbors(args: argparse.Namespace) -> int:
    from pcreg.bench.neighbors import (
        benchmark_neighbors,
        format_neighbor_table,
        load_benchmark_cloud,
    )

    cloud, source = load_benchmark_cloud(args.shared_data if args.shared_data.is_dir() else None)
    results = benchmark_neighbors(cloud, radius=args.radius, cap=args.cap, runs=args.runs)
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
    table = format_model_table(results, _command(args))
    return _emit(args, "model", table)


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


def _benchmark_pipeline(args: argparse.Namespace) -> int:
    from pcreg.bench.pipeline import benchmark_pipeline, format_pipeline_tables
    from pcreg.errors import MissingFileError

    if not args.shared_data.is_dir():
        raise MissingFileError(args.shared_data, "the pipeline benchmark needs the real pairs")
    models = {
        setting: value
        for setting, value in (("indoor", args.indoor_model), ("outdoor", args.outdoor_model))
        if value != "none"
    }
    results = benchmark_pipeline(args.shared_data, models, runs=args.runs)
    table = format_pipeline_tables(results, _command(args))
    return _emit(args, "pipeline", table)


def _benchmark_registration(args: argparse.Namespace) -> int:
    from pcreg.bench.registration import (
        default_methods,
        format_registration_table,
        real_cases,
        run_cases,
        synthetic_cases,
    )
    from pcreg.errors import InputError

    models = {}
    for setting, value in (("indoor", args.indoor_model), ("outdoor", args.outdoor_model)):
        if value != "none":
            models[setting] = value
    cases = real_cases(args.shared_data, draws=args.draws) if args.shared_data.is_dir() else []
    for setting, root in (("indoor", args.synthetic_indoor), ("outdoor", args.synthetic_outdoor)):
        if root is not None:
            cases += synthetic_cases(root, setting, limit=args.limit)
    if not cases:
        raise InputError(
            args.shared_data, "no benchmark cases: shared data and synthetic sets absent"
        )
    outcomes = run_cases(cases, default_methods(models, icp=not args.no_icp))
    table = format_registration_table(outcomes, _command(args))
    return _emit(args, "registration", table)


def _cmd_demo(args: argparse.Namespace) -> int:
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


def _cmd_vit(args: argparse.Namespace) -> int:
    import json

    from pcreg._compose import compose
    from pcreg.config import ViTExperimentConfig, from_dict
    from pcreg.engine.classification import evaluate_vit, train_vit

    cfg = from_dict(ViTExperimentConfig, compose("vit", args.overrides))
    if args.action == "train":
        metrics = train_vit(cfg)
        metrics = {k: v for k, v in metrics.items() if k != "history"}
    else:
        metrics = evaluate_vit(cfg)
    sys.stdout.write(json.dumps(metrics) + "\n")
    return 0


def _cmd_detr(args: argparse.Namespace) -> int:
    import json

    from pcreg._compose import compose
    from pcreg.config import DetrExperimentConfig, from_dict
    from pcreg.engine.detection import evaluate_detr, train_detr

    cfg = from_dict(DetrExperimentConfig, compose("detr", args.overrides))
    metrics = train_detr(cfg) if args.action == "train" else evaluate_detr(cfg)
    sys.stdout.write(json.dumps(metrics) + "\n")
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    import json

    from pcreg._compose import compose
    from pcreg.config import TrainConfig, from_dict
    from pcreg.engine.train import train_registration

    cfg = from_dict(TrainConfig, compose("train", args.overrides))
    metrics = train_registration(cfg)
    if int(os.environ.get("RANK", "0")) == 0:
        sys.stdout.write(json.dumps(metrics) + "\n")
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    import functools
    import json

    from pcreg._compose import compose
    from pcreg._fs import atomic_output, check_writable
    from pcreg.config import ConfigError, EvaluateConfig, from_dict
    from pcreg.engine.evaluate import evaluate_pairs, format_evaluation_markdown
    from pcreg.engine.inference import Registrar

    cfg = from_dict(EvaluateConfig, compose("evaluate", args.overrides))
    if not cfg.checkpoint:
        raise ConfigError("checkpoint", "give the model to evaluate: checkpoint=PATH")
    if not cfg.dataset.root:
        raise ConfigError("dataset.root", "give the dataset root: dataset.root=DIR")
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("results.json", "results.md"):
        check_writable(out / name, overwrite=cfg.overwrite)
    root = Path(cfg.dataset.root)
    if cfg.dataset.layout == "threedmatch":
        from pcreg.data.threedmatch import ThreeDMatchPairs

        dataset = ThreeDMatchPairs(root, cfg.dataset.benchmark)
        bdir = cfg.dataset.benchmark_dir or root / "metadata" / "benchmarks" / cfg.dataset.benchmark
        bdir = bdir if Path(bdir).is_dir() else None
        protocol = "threedmatch"
    elif cfg.dataset.layout == "kitti":
        from pcreg.data.kitti import KittiPairs

        dataset, bdir, protocol = KittiPairs(root, cfg.dataset.benchmark), None, "kitti"
    else:
        raise ConfigError(
            "dataset.layout", f"must be threedmatch or kitti, got {cfg.dataset.layout!r}"
        )
    if cfg.workers < 1:
        raise ConfigError("workers", f"must be at least 1, got {cfg.workers}")
    if cfg.workers > 1 and cfg.device != "cpu":
        raise ConfigError("workers", f"worker processes are for device=cpu, not {cfg.device}")
    from pcreg.engine.distributed import cleanup, setup

    info = setup(cfg.device)  # under torchrun the pairs are sharded over the ranks
    if cfg.workers > 1 and info.world_size > 1:
        cleanup(info)
        raise ConfigError("workers", "use either torchrun's processes or workers=N, not both")
    registrar = None
    try:
        registrar = Registrar.from_checkpoint(cfg.checkpoint, device=cfg.device)
        many = None
        if cfg.workers > 1:
            many = functools.partial(registrar.batch, workers=cfg.workers)
        result = evaluate_pairs(
            dataset,
            registrar,
            protocol=protocol,
            benchmark_dir=bdir,
            limit=cfg.limit,
            rank=info.rank,
            world_size=info.world_size,
            predict_many=many,
            chunk=16 * cfg.workers,
        )
    finally:
        if registrar is not None:
            registrar.close()
        cleanup(info)
    if not info.is_main:
        return 0
    table = format_evaluation_markdown(result)
    with atomic_output(out / "results.json", overwrite=cfg.overwrite) as tmp:
        tmp.write_text(json.dumps(result, indent=1))
    with atomic_output(out / "results.md", overwrite=cfg.overwrite) as tmp:
        tmp.write_text(table + "\n")
    sys.stdout.write(table + "\n")
    return 0


def _cmd_evaluate_log(args: argparse.Namespace) -> int:
    import json

    from pcreg.engine.evaluate_log import format_scores_markdown, score_log_dirs

    scores = score_log_dirs(args.gt_dir, args.est_dir, rmse_threshold=args.rmse_threshold)
    if args.json:
        sys.stdout.write(json.dumps({k: scores[k] for k in ("scenes", "overall")}) + "\n")
    else:
        sys.stdout.write(format_scores_markdown(scores) + "\n")
    return 0


def _hydra_subcommand(
    sub, name: str, func, help: str, example: str, positional: tuple[str, list[str]] | None = None
):
    """A subcommand that takes Hydra ``key=value`` overrides (after an optional choice)."""
    cmd = sub.add_parser(name, help=help, description=f"Hydra overrides, {example}")
    if positional is not None:
        cmd.add_argument(positional[0], choices=positional[1])
    cmd.add_argument("overrides", nargs="*", help="Hydra overrides key=value")
    cmd.set_defaults(func=func)
    return cmd


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pcreg", description="3-D point-cloud registration.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    bench = sub.add_parser(
        "benchmark",
        help="every benchmark section (or one: --model, --pipeline, ...) into BENCHMARKS.md",
    )
    bench.add_argument(
        "--quick",
        action="store_true",
        help="neighbor search and grid subsampling only (a minute)",
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
    bench.add_argument("--draws", type=int, default=10, help="random motions per real pair")
    bench.add_argument("--indoor-model", default="indoor", help="name, PATH or none")
    bench.add_argument("--outdoor-model", default="outdoor", help="name, PATH or none")
    bench.add_argument("--synthetic-indoor", type=Path, help="generated indoor dataset root")
    bench.add_argument("--synthetic-outdoor", type=Path, help="generated outdoor dataset root")
    bench.add_argument("--limit", type=int, default=40, help="synthetic pairs per overlap bin")
    bench.add_argument("--no-icp", action="store_true", help="skip the 'model + ICP' column")
    bench.add_argument("--runs", type=int, default=5, help="timed runs per case (median)")
    bench.add_argument("--radius", type=float, default=0.5, help="radius search radius, metres")
    bench.add_argument("--cap", type=int, default=32, help="radius search neighbor cap")
    bench.add_argument(
        "--output",
        type=Path,
        default=Path("BENCHMARKS.md"),
        help="Markdown file whose sections are replaced",
    )
    bench.add_argument("--shared-data", type=Path, default=DEFAULT_SHARED_DATA)
    bench.set_defaults(func=_cmd_benchmark)

    from pcreg.commands import odometry as odometry_cmd
    from pcreg.commands import register as register_cmd
    from pcreg.commands import view as view_cmd

    register_cmd.add_parser(sub)
    odometry_cmd.add_parser(sub)
    view_cmd.add_parser(sub)

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
        help="auto: the shipped model if present, else FPFH+RANSAC+ICP",
    )
    demo.add_argument("--icp", action="store_true", help="refine with point-to-plane ICP")
    demo.add_argument("--force", action="store_true", help="replace existing outputs")
    demo.add_argument("--shared-data", type=Path, default=DEFAULT_SHARED_DATA)
    demo.set_defaults(func=_cmd_demo)

    _hydra_subcommand(
        sub,
        "vit",
        _cmd_vit,
        "train / evaluate the ViT classifier on the digits images",
        "e.g. `pcreg vit train experiment=vit_digits train.lr=1e-3`.",
        positional=("action", ["train", "evaluate"]),
    )
    _hydra_subcommand(
        sub,
        "detr",
        _cmd_detr,
        "train / evaluate the DETR detector (COCO format; synthetic shapes by default)",
        "e.g. `pcreg detr train experiment=detr_shapes train.epochs=10`.",
        positional=("action", ["train", "evaluate"]),
    )
    _hydra_subcommand(
        sub,
        "train",
        _cmd_train,
        "train the registration network (torchrun-compatible)",
        "e.g. `pcreg train experiment=synthetic_indoor train.epochs=5`; "
        "`torchrun --nproc_per_node=2 -m pcreg train ...` for DDP.",
    )
    _hydra_subcommand(
        sub,
        "evaluate",
        _cmd_evaluate,
        "run a model checkpoint over a benchmark (FMR, IR, RR, RRE, RTE)",
        "e.g. `pcreg evaluate checkpoint=m.pt dataset.root=DIR dataset.benchmark=3DLoMatch`; "
        "writes results.md / results.json to out_dir.",
    )

    ev = sub.add_parser(
        "evaluate-log",
        help="score 3DMatch-format estimates (.log) with the published protocol",
        description="GT_DIR holds <scene>/gt.log and gt.info; EST_DIR <scene>/est.log or "
        "<scene>.log. Non-consecutive pairs only; RR = mean of per-scene recalls.",
    )
    ev.add_argument("--gt-dir", type=Path, required=True)
    ev.add_argument("--est-dir", type=Path, required=True)
    ev.add_argument("--rmse-threshold", type=float, default=0.2, help="metres")
    ev.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ev.set_defaults(func=_cmd_evaluate_log)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``pcreg`` console script. Returns the process exit code."""
    from pcreg.errors import InputError

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv  # recorded in benchmark tables
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return int(args.func(args))
    except InputError as err:
        sys.stderr.write(f"pcreg: error: {err}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("pcreg: interrupted\n")
        return 130
    except Exception as err:  # internal error: one line, plus the traceback with -v
        logger.debug("internal error", exc_info=True)
        sys.stderr.write(f"pcreg: internal error: {type(err).__name__}: {err}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
