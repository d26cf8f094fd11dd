"""``pcreg evaluate`` (a checkpoint over a benchmark, :func:`pcreg.evaluation.run_evaluation`)
and ``pcreg evaluate-log`` (3DMatch ``.log`` estimates, :mod:`pcreg.engine.evaluate_log`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pcreg.commands._hydra import add_hydra_subcommand

__all__ = ["add_parser", "run", "run_log"]


def add_parser(sub) -> None:
    add_hydra_subcommand(
        sub,
        "evaluate",
        run,
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
    ev.set_defaults(func=run_log)


def run(args: argparse.Namespace) -> int:
    from pcreg._compose import compose
    from pcreg.config import EvaluateConfig, from_dict
    from pcreg.engine.evaluate import format_evaluation_markdown
    from pcreg.evaluation import run_evaluation

    result = run_evaluation(from_dict(EvaluateConfig, compose("evaluate", args.overrides)))
    if result is not None:  # the main rank
        sys.stdout.write(format_evaluation_markdown(result) + "\n")
    return 0


def run_log(args: argparse.Namespace) -> int:
    from pcreg.engine.evaluate_log import format_scores_markdown, score_log_dirs

    scores = score_log_dirs(args.gt_dir, args.est_dir, rmse_threshold=args.rmse_threshold)
    if args.json:
        sys.stdout.write(json.dumps({k: scores[k] for k in ("scenes", "overall")}) + "\n")
    else:
        sys.stdout.write(format_scores_markdown(scores) + "\n")
    return 0
