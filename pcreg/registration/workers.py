"""Many pairs on a CPU: the registration pipeline in worker processes of one torch thread each.

One registration does not keep two cores busy. Its network is thousands of small ops (the
KPConv gathers, per-patch Sinkhorn problems, the LGR's 3 x 3 solves) that torch's thread pool
splits poorly, so a second intra-op thread buys little: measured on a 2-core CPU, four real
3DMatch pairs one after another took 3.0-3.5 s with torch's 2 threads and the same with 1.
Packing the pairs into one padded forward pass does not help either (0.83-0.97x,
``BENCHMARKS.md``). Separate processes do: two workers of one thread each registered the four
3DMatch pairs in 1.7-2.1 s.

:class:`WorkerPool` holds such processes (``spawn``ed, so no OpenMP state is inherited), each
with its own copy of the pipeline: the same options, and the parent's network (configuration
and weights) when the pipeline names one; pairs go to whichever worker is free and come back
in order. Starting the pool costs a few seconds (every worker imports torch and builds the
model).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING

import numpy as np
import torch

from pcreg.engine.heap import peak_rss_mib

if TYPE_CHECKING:
    from pcreg.registration.pipeline import Registration
    from pcreg.registration.result import RegistrationResult

__all__ = ["WorkerPool", "largest_first"]

logger = logging.getLogger(__name__)

_WORKER: Registration | None = None  # the pipeline of this worker process


class WorkerPool:
    """``workers`` processes running a snapshot of ``pipeline`` (CPU only).

    Each worker runs ``cpu_count // workers`` torch threads (at least 1). Use as a context
    manager or call :meth:`close`.
    """

    def __init__(self, pipeline: Registration, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if pipeline.device != "cpu":
            raise ValueError(f"worker processes are for the CPU, not {pipeline.device}")
        self.workers = workers
        threads = max(1, (os.cpu_count() or 1) // workers)
        snapshot = None
        if pipeline.method == "geotransformer" and pipeline.model is not None:
            loaded = pipeline.networks(pipeline.model, "cpu")
            state = {k: v.detach().cpu() for k, v in loaded.network.model.state_dict().items()}
            snapshot = (loaded.network.config, state, loaded.search, loaded.setting)
        options = {
            "model": pipeline.model,
            "method": pipeline.method,
            "icp": pipeline.icp,
            "voxel_size": pipeline.voxel_size,
            "search": pipeline.search_overrides,
        }
        from pcreg.engine.heap import retaining

        self._executor = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker,
            initargs=(options, snapshot, threads, retaining()),
        )
        logger.debug("worker pool: %d processes x %d torch threads", workers, threads)

    def map(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[RegistrationResult]:
        """Register ``(src, ref)`` pairs; results in input order, each with its own timings
        (measured in its worker).

        Pairs are handed out largest first (:func:`largest_first`), so that a big pair does
        not start last and leave the other workers idle while it runs."""
        futures = {i: self._executor.submit(_register_one, pairs[i]) for i in largest_first(pairs)}
        return [futures[i].result() for i in range(len(pairs))]

    def peak_rss_mib(self) -> float | None:
        """The largest peak resident memory of the live workers in MiB
        (:func:`pcreg.engine.heap.peak_rss_mib`); None where it cannot be read."""
        # the executor's live processes (a private attribute: absent -> None, as documented)
        pids = list(getattr(self._executor, "_processes", None) or {})
        peaks = [m for m in map(peak_rss_mib, pids) if m is not None]
        return max(peaks) if peaks else None

    def close(self) -> None:
        """Stop the workers (waits for the pairs under way)."""
        self._executor.shutdown(wait=True)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def largest_first(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[int]:
    """Indices of ``pairs`` by decreasing total point count (ties in input order).

    The longest-processing-time-first rule for spreading jobs over identical workers (Graham,
    1969: within 4/3 of the best makespan), with the point count as the cost estimate.
    Measured on a 2-core CPU, four 3DMatch pairs alternating 0<-6 / 0<-5 over 2 workers: in
    input order one worker got both 0<-5 pairs (5 orientation hypotheses against 4), 1.69
    pairs/s; largest first, 1.86 pairs/s (median of 7, alternating). The count is only an
    estimate: the two KITTI pairs differ by 1 % in points but 20 % in time.
    """
    return sorted(range(len(pairs)), key=lambda i: -(len(pairs[i][0]) + len(pairs[i][1])))


def _start_worker(options: dict, snapshot: tuple | None, threads: int, retain: bool) -> None:
    from pcreg.engine.heap import retain_freed_memory
    from pcreg.registration.loading import LoadedNetwork, load_network
    from pcreg.registration.network import Registrar
    from pcreg.registration.pipeline import Registration

    global _WORKER
    if retain:  # the parent's allocator choice (the command line makes it: pcreg/cli.py)
        retain_freed_memory()
    torch.set_num_threads(threads)
    cache: dict[str, LoadedNetwork] = {}
    if snapshot is not None:
        config, state, search, setting = snapshot
        network = Registrar.from_state(config, state)
        cache[options["model"]] = LoadedNetwork(network, search, options["model"], setting)

    def networks(model: str, device: str) -> LoadedNetwork:
        if model not in cache:
            cache[model] = load_network(model, device)
        return cache[model]

    _WORKER = Registration(**options, networks=networks)


def _register_one(pair: tuple[np.ndarray, np.ndarray]) -> RegistrationResult:
    if _WORKER is None:  # pragma: no cover - the initializer always ran
        raise RuntimeError("worker process without a model")
    return _WORKER(*pair)
