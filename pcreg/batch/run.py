"""``pcreg batch``: every pair of a manifest, on Ray, resumable.

``DIR/results.jsonl`` gets one line per finished pair (:mod:`pcreg.batch.results`); a run
started again with the same command skips the pairs already there, so an interrupted run
(Ctrl-C, a killed driver) loses at most the pairs that were under way. ``DIR/summary.json`` and
a short table summarise all finished pairs at the end.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

from tqdm.auto import tqdm

from pcreg._fs import atomic_output
from pcreg.batch.manifest import ManifestPair
from pcreg.batch.results import ResultsLog, summarise
from pcreg.batch.runner import (
    BatchOptions,
    RayRunner,
    check_cluster_arguments,
    failed_row,
    results_dir,
)

__all__ = ["run_batch"]

logger = logging.getLogger(__name__)


def run_batch(
    pairs: Sequence[ManifestPair],
    out: str | os.PathLike[str],
    options: BatchOptions,
    *,
    address: str | None = None,
    workers: int | None = None,
    progress: bool = True,
    overwrite: bool = False,
) -> dict:
    """Register the ``pairs`` not yet registered in ``out/results.jsonl`` (pairs that failed
    before are tried again); returns the summary of every pair's latest row (also written to
    ``out/summary.json``), with ``new``: pairs run now, and ``pairs_per_s``: their throughput.
    ``overwrite``: start from an empty results file instead of resuming."""
    import ray

    options.pipeline()  # its arguments are checked here, before any cluster starts
    check_cluster_arguments(address, workers)  # and before anything is created
    out = results_dir(out)
    if overwrite:
        for name in ("results.jsonl", "summary.json"):
            (out / name).unlink(missing_ok=True)
    with ResultsLog(out / "results.jsonl") as log:
        done = log.done
        todo = [p for p in pairs if p.id not in done]
        logger.info("%d pairs: %d done before, %d to register", len(pairs), len(done), len(todo))
        start = time.perf_counter()
        if todo:
            with RayRunner(options, address=address, workers=workers) as runner:
                pending = runner.submit(todo)
                start = time.perf_counter()  # the cluster is up: time the pairs alone
                with tqdm(
                    total=len(pairs), initial=len(pairs) - len(todo), unit="pair",
                    desc="batch", disable=not progress, smoothing=0.1,
                ) as bar:  # fmt: skip
                    while pending:
                        ready, _ = ray.wait(list(pending), num_returns=1)
                        for ref in ready:
                            pair = pending.pop(ref)
                            try:
                                row = ray.get(ref)
                            except (ray.exceptions.RayError, OSError) as err:
                                row = failed_row(pair, err)
                            log.append(row)
                            bar.update(1)
        wall = time.perf_counter() - start
        ids = {p.id for p in pairs}
        summary = summarise([r for i, r in log.latest().items() if i in ids])
    summary["new"] = len(todo)
    summary["pairs_per_s"] = len(todo) / wall if todo and wall > 0 else None
    with atomic_output(Path(out) / "summary.json", overwrite=True) as tmp:
        tmp.write_text(json.dumps(summary, indent=1) + "\n")
    return summary
