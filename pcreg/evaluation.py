"""``pcreg evaluate``: a registration checkpoint over a benchmark, through the one pipeline.

The dataset, the published protocol and the scoring are :mod:`pcreg.engine.evaluate`'s; this
module builds the :class:`~pcreg.registration.Registration` pipeline for the checkpoint (its
own default orientation search, no ICP), spreads the pairs over torchrun ranks or worker
processes, and writes the results.
"""

from __future__ import annotations

import json
from pathlib import Path

from pcreg._fs import atomic_output, check_writable
from pcreg.config import ConfigError, EvaluateConfig
from pcreg.engine.evaluate import evaluate_pairs, evaluation_dataset, format_evaluation_markdown
from pcreg.errors import OutputExistsError

__all__ = ["run_evaluation"]


def run_evaluation(cfg: EvaluateConfig) -> dict | None:
    """Score ``cfg.checkpoint`` on ``cfg.dataset`` and write ``results.json`` /
    ``results.md`` (atomically) into ``cfg.out_dir``.

    Under ``torchrun`` the pairs are sharded over the ranks; ``workers > 1`` (CPU only) spreads
    them over a local Ray cluster of that many CPUs instead (:mod:`pcreg.batch.runner`).
    Existing results are refused before any work unless ``cfg.overwrite``. Returns
    :func:`~pcreg.engine.evaluate.evaluate_pairs`' result on the main rank, None on the others.

    Raises:
        ConfigError: a missing checkpoint or dataset root, an unknown layout, bad ``workers``.
        OutputExistsError: results exist and ``cfg.overwrite`` is false (``overwrite=true``).
        InputError: a dataset without pairs (a KITTI split with no scans names the others).
    """
    if not cfg.checkpoint:
        raise ConfigError("checkpoint", "give the model to evaluate: checkpoint=PATH")
    if not cfg.dataset.root:
        raise ConfigError("dataset.root", "give the dataset root: dataset.root=DIR")
    from pcreg.registration.shipped import weights_path

    out = Path(cfg.out_dir)

    def check_results() -> None:
        for name in ("results.json", "results.md"):
            try:
                check_writable(out / name, overwrite=cfg.overwrite)
            except OutputExistsError:  # its own wording: evaluate takes overrides, not --force
                raise OutputExistsError(
                    out / name, "already exists (add overwrite=true to replace it)"
                ) from None

    if out.is_dir():  # results already there: said first
        check_results()
    # every argument checked before out_dir is made: an argument error creates nothing
    dataset, bdir, protocol = evaluation_dataset(cfg.dataset)
    if cfg.workers < 1:
        raise ConfigError("workers", f"must be at least 1, got {cfg.workers}")
    if cfg.workers > 1 and cfg.device != "cpu":
        raise ConfigError("workers", f"worker processes are for device=cpu, not {cfg.device}")
    weights_path(cfg.checkpoint)  # a checkpoint path that is not there
    out.mkdir(parents=True, exist_ok=True)
    check_results()
    from pcreg.engine.distributed import cleanup, setup
    from pcreg.registration.pipeline import Registration

    info = setup(cfg.device)  # under torchrun the pairs are sharded over the ranks
    if cfg.workers > 1 and info.world_size > 1:
        cleanup(info)
        raise ConfigError("workers", "use either torchrun's processes or workers=N, not both")
    runner = None
    try:
        # the published protocol scores the network's own estimate: no ICP
        pipeline = Registration(str(cfg.checkpoint), device=cfg.device, icp=False)
        pipeline.loaded()  # load (and check) the checkpoint before any pair is read
        if cfg.workers > 1:
            from pcreg.batch.runner import BatchOptions, RayRunner
            from pcreg.engine.heap import retaining

            options = BatchOptions(model=str(cfg.checkpoint), icp=False, retain_heap=retaining())
            loaded = {options.model: pipeline.loaded()}  # loaded above: not read again
            runner = RayRunner(options, workers=cfg.workers, loaded=loaded)
        result = evaluate_pairs(
            dataset,
            pipeline,
            protocol=protocol,
            benchmark_dir=bdir,
            limit=cfg.limit,
            rank=info.rank,
            world_size=info.world_size,
            predict_many=runner.map if runner is not None else None,
            chunk=16 * cfg.workers,
        )
    finally:
        if runner is not None:
            runner.close()
        cleanup(info)
    if not info.is_main:
        return None
    with atomic_output(out / "results.json", overwrite=cfg.overwrite) as tmp:
        tmp.write_text(json.dumps(result, indent=1))
    with atomic_output(out / "results.md", overwrite=cfg.overwrite) as tmp:
        tmp.write_text(format_evaluation_markdown(result) + "\n")
    return result
