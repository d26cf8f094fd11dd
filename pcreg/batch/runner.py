"""Many pairs on Ray: the registration pipeline in Ray tasks, on this machine or a cluster.

One registration keeps about one core busy (thousands of small ops that torch's thread pool
splits poorly), so throughput comes from registering pairs side by side: one Ray task per
pair and one CPU each, with the node's cores per Ray CPU as torch threads
(:func:`threads_per_cpu`). Ray schedules the tasks over every CPU of the cluster
it is connected to: a local one it starts itself (all cores of this machine, or ``workers``),
or an existing one (``address``, or ``RAY_ADDRESS``: ``ray start --head`` on one machine,
``ray start --address=HEAD:PORT`` on the others).

The networks travel once: the driver loads each network it needs and puts its configuration
and weights (numpy arrays) into Ray's object store; a worker process takes them from there on
its first pair and keeps the built pipeline for every later pair it runs. A worker process that
dies mid-pair has the pair retried once by Ray (``max_retries=1``); a pair whose registration
raises is not retried (the same input fails the same way) and comes back as failed with its
error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pcreg.batch.reaper import ClusterReaper
from pcreg.errors import InputError

if TYPE_CHECKING:
    from pcreg.batch.manifest import ManifestPair
    from pcreg.registration.loading import LoadedNetwork
    from pcreg.registration.pipeline import Registration
    from pcreg.registration.result import RegistrationResult

__all__ = [
    "BatchOptions",
    "RayRunner",
    "check_cluster_arguments",
    "largest_first",
    "threads_per_cpu",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchOptions:
    """The :class:`~pcreg.registration.Registration` options of every pair of a run (as
    ``pcreg register`` takes them), and whether workers keep freed memory in the heap (the
    command line's allocator choice, :mod:`pcreg.engine.heap`)."""

    model: str | None = None
    method: str = "geotransformer"
    icp: bool = True
    voxel_size: float | None = None
    search: dict[str, Any] = field(default_factory=dict)
    retain_heap: bool = False
    max_memory: int | str | None = None
    nan_policy: str = "drop"

    def pipeline(self, networks: Callable | None = None) -> Registration:
        from pcreg.registration.pipeline import Registration

        return Registration(
            self.model,
            method=self.method,
            icp=self.icp,
            voxel_size=self.voxel_size,
            search=dict(self.search),
            networks=networks,
            max_memory=self.max_memory,
        )


def largest_first(sizes: Sequence[float]) -> list[int]:
    """Indices by decreasing size, ties in input order: the longest-processing-time-first rule
    for spreading jobs over identical workers (Graham, 1969: within 4/3 of the best makespan),
    with the clouds' size as the cost estimate. Measured on a 2-core CPU, four 3DMatch pairs
    alternating 0<-6 / 0<-5 over 2 workers: 1.69 pairs/s in input order, 1.86 largest first."""
    return sorted(range(len(sizes)), key=lambda i: -sizes[i])


#: arguments and results up to this size travel inside the task's own message on a local cluster
#: started here, not through the shared-memory object store (Ray's default limit: 100 KB).
#: A room's pair of clouds is ~0.5 MB; through the store each task cost the driver and the
#: raylet ~10 ms of CPU in object bookkeeping and left its worker waiting for it. Measured on
#: the 2-core AMD EPYC, 40 tasks of 0.25 s busy work with a generated room's pair as arguments
#: on 2 CPUs: 5.31-5.36 s through the store, 5.19-5.20 s inlined, 5.15-5.18 s without
#: arguments (ideal 5.0). An existing cluster keeps its own setting.
INLINE_BYTES = 8 << 20

#: Ray's settings for a local cluster started here: the inlined size above, and no metrics
#: collection (their consumer, the dashboard, is not started): idle, the workers' and the
#: raylet's background work then took 0.84 s of CPU in 20 s against 0.98 s with it (all of
#: Ray's processes on the 2-core EPYC, one reading each; every such second is taken from the
#: registrations when all cores are busy).
LOCAL_SYSTEM_CONFIG = {
    "max_direct_call_object_size": INLINE_BYTES,
    "enable_metrics_collection": False,
}

# -- the worker side ------------------------------------------------------------------------

_PIPELINES: dict[str, Registration] = {}


def _worker_pipeline(options: BatchOptions, networks: dict[str, Any]) -> Registration:
    """This worker process's pipeline for ``options``, built on its first pair: the networks
    from the object store (``networks``: model name -> ObjectRef of :func:`_network_blob`)."""
    key = repr(options)
    if key in _PIPELINES:
        return _PIPELINES[key]
    import ray

    from pcreg.config import SearchConfig
    from pcreg.engine.heap import retain_freed_memory
    from pcreg.engine.threads import set_thread_ceiling
    from pcreg.registration.loaded import LoadedNetwork

    threads = _node_threads()
    set_thread_ceiling(threads)  # the ONNX Runtime path's ceiling (torch's below, if it loads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    if options.retain_heap:
        retain_freed_memory()
    cache: dict[str, LoadedNetwork] = {}

    def load(model: str, device: str) -> LoadedNetwork:
        if model not in cache:
            if model in networks:
                blob = ray.get(networks[model])
                search = SearchConfig(**blob["search"])
                if "onnx" in blob:
                    from pcreg.registration.onnx_network import OnnxRegistrar

                    net = OnnxRegistrar(blob["onnx"], blob["graphs"])
                else:
                    import torch

                    from pcreg.registration.network import Registrar

                    torch.set_num_threads(threads)
                    state = {k: torch.from_numpy(np.array(v)) for k, v in blob["state"].items()}
                    net = Registrar.from_state(blob["config"], state)
                cache[model] = LoadedNetwork(net, search, model, blob["setting"])
            else:
                from pcreg.registration.networks import load_for_registration

                cache[model] = load_for_registration(model, device)
        return cache[model]

    _PIPELINES[key] = pipe = options.pipeline(load)
    return pipe


def threads_per_cpu(cores: int, cpus: float) -> int:
    """torch threads for a task of one Ray CPU on a node of ``cores`` usable cores that offers
    Ray ``cpus`` CPUs: the cores per CPU, at least one. A local cluster of 2 CPUs on 2 cores
    runs one thread per task; one of 1 CPU (``workers=1``) gives its one task both cores: on
    the generated indoor set (2-core AMD EPYC) one task of one thread registered 1.85-1.86
    pairs/s against 2.29-2.32 for the old process pool, whose single worker ran two. Each
    registration still fits its threads to the cores free when it starts
    (:func:`pcreg.engine.threads.fitted_threads`), which keeps the torch and Open3D regions
    of nodes that share a machine (as in the tests: two nodes of one CPU on two cores) from
    oversubscribing it, except when two registrations start within the same few
    milliseconds; the ONNX path's two lanes, which never wait for each other, run on the
    task's share whatever the load (:func:`pcreg.engine.threads.current_lanes`)."""
    return max(1, int(cores) // max(1, int(cpus)))


def _node_threads() -> int:
    """:func:`threads_per_cpu` for the node this Ray worker runs on; 1 where Ray does not
    list the node or its CPUs."""
    import ray

    from pcreg.engine.threads import usable_cores

    here = ray.get_runtime_context().get_node_id()
    node = next((n for n in ray.nodes() if n.get("NodeID") == here), None)
    if node is None or "CPU" not in node.get("Resources", {}):
        return 1  # unknown share: one thread, which never oversubscribes the node
    return threads_per_cpu(usable_cores(), node["Resources"]["CPU"])


def register_file(job: dict, options: BatchOptions, networks: dict) -> dict:
    """A Ray task: register the files of one manifest pair; its ``results.jsonl`` row."""
    start = time.perf_counter()
    row: dict[str, Any] = {"id": job["id"], "src": job["src"], "ref": job["ref"]}
    try:
        pipe = _worker_pipeline(options, networks)
        src, ref = _read(job["src"], options), _read(job["ref"], options)
        result = pipe(src, ref, (job["src"], job["ref"]))
        _read_load_for_the_next_pair()
    except InputError as err:
        return {**row, "status": "failed", "registered": False, "error": str(err)}
    row.update(result.to_dict(), status="ok", registered=result.registered)
    if job.get("gt") is not None:
        row.update(result.errors(np.asarray(job["gt"], np.float64).reshape(4, 4), src))
    import ray

    node = ray.util.get_node_ip_address() if ray.is_initialized() else socket.gethostname()
    row.update(wall_s=time.perf_counter() - start, worker=f"{node}:{os.getpid()}")
    return row


def _read(path: str, options: BatchOptions) -> np.ndarray:
    """A cloud of a manifest: any format :func:`pcreg.io.read_points` reads (with the
    options' NaN policy and memory cap), and 3DMatch metadata's ``.pth`` fragments
    (:func:`pcreg.data.threedmatch.load_fragment`)."""
    if path.endswith(".pth"):
        from pcreg.data.threedmatch import load_fragment

        return load_fragment(path)
    from pcreg.io import read_points
    from pcreg.registration.resources import read_cap

    return read_points(path, nan_policy=options.nan_policy, max_memory=read_cap(options.max_memory))


def register_arrays(
    src: np.ndarray,
    ref: np.ndarray,
    options: BatchOptions,
    networks: dict,
    names: tuple[str, str] = ("src", "ref"),
):
    """A Ray task: register one in-memory pair (``names`` label it in errors); its
    :class:`RegistrationResult`."""
    result = _worker_pipeline(options, networks)(src, ref, names)
    _read_load_for_the_next_pair()
    return result


def _read_load_for_the_next_pair() -> None:
    """A worker of more than one thread reads the load for its next pair now, while its
    cluster's own processes are quiet (:func:`pcreg.engine.threads.read_load_ahead`)."""
    from pcreg.engine.threads import read_load_ahead, thread_ceiling

    if thread_ceiling() > 1:
        read_load_ahead()


# -- the driver side ------------------------------------------------------------------------


def _network_blob(loaded: LoadedNetwork) -> dict:
    """What a worker rebuilds ``loaded`` from: the ONNX Runtime graphs (serialised) and their
    manifest, or the torch network's configuration and weights (numpy)."""
    common = {"search": dataclasses.asdict(loaded.search), "setting": loaded.setting}
    net = loaded.network
    from pcreg.registration.onnx_network import OnnxRegistrar

    if isinstance(net, OnnxRegistrar):
        from pcreg.registration.onnx_loading import export_folder, graph_files

        folder, _ = export_folder(loaded.name)
        graphs = {k: p.read_bytes() for k, p in graph_files(folder, net.manifest).items()}
        return {**common, "onnx": net.manifest, "graphs": graphs}
    return {
        **common,
        "config": dataclasses.asdict(net.config),
        "state": {k: v.detach().cpu().numpy() for k, v in net.model.state_dict().items()},
    }


class RayRunner:
    """A connection to Ray with the networks of ``options`` in its object store.

    Args:
        options: the pipeline options of every pair.
        address: an existing cluster (``"ray://HOST:PORT"``, ``"HOST:PORT"`` or ``"auto"``);
            None: ``RAY_ADDRESS`` if set, else a local cluster started here.
        workers: CPUs of the local cluster (default: all cores); ignored for an existing one.
        loaded: networks the caller has already loaded, by model name (not loaded again).

    Use as a context manager or call :meth:`close` (which stops a cluster started here). A
    local cluster started here also goes when this process is killed outright
    (:mod:`pcreg.batch.reaper`); a cluster given by address is only ever disconnected from.
    """

    def __init__(
        self,
        options: BatchOptions,
        address: str | None = None,
        workers: int | None = None,
        loaded: dict[str, LoadedNetwork] | None = None,
    ) -> None:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network here; opt-in only
        import ray

        self.options = options
        address = address or os.environ.get("RAY_ADDRESS") or None
        if workers is not None and workers < 1:
            raise InputError("workers", f"must be at least 1, got {workers}")
        self._started = not ray.is_initialized()
        self._reaper: ClusterReaper | None = None
        if self._started:
            # Ray's own notes (its token authentication, start-up) only when we log at DEBUG:
            # the command line's stderr holds pcreg's warnings and one-line errors
            level = logging.DEBUG if logger.isEnabledFor(logging.DEBUG) else logging.ERROR
            kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": level}
            if address:
                _check_reachable(address)
            else:  # a local cluster dies with this process, even one killed outright
                self._reaper = ClusterReaper.start()
                if self._reaper is not None:
                    kwargs["_temp_dir"] = self._reaper.temp_dir
            try:
                with _keep_sigterm_handler():
                    if address:
                        ray.init(address=address, **kwargs)
                    else:
                        ray.init(
                            address="local",  # a new cluster, even if `ray start` ran here
                            num_cpus=workers or os.cpu_count() or 1,
                            include_dashboard=False,
                            object_store_memory=1 << 30,
                            _system_config=LOCAL_SYSTEM_CONFIG,
                            **kwargs,
                        )
            except BaseException:  # SIGTERM or Ctrl-C while it starts: stop what started
                self.close()
                raise
        try:
            self._connect(options, loaded)
        except BaseException:  # a bad model, or a signal: the cluster is not left running
            self.close()
            raise
        logger.info(
            "Ray: %s with %d CPUs, %d network(s) in the object store",
            address or "a local cluster", self.cpus, len(self.networks),
        )  # fmt: skip

    def _connect(self, options: BatchOptions, loaded: dict[str, LoadedNetwork] | None) -> None:
        """The cluster's CPUs, the networks in its object store, the task functions."""
        import ray

        self.cpus = int(ray.cluster_resources().get("CPU", 1))
        names: list[str] = []
        if options.method != "fpfh-ransac":
            names = [options.model] if options.model else self._shipped()
        from pcreg.registration.networks import load_for_registration

        have = dict(loaded or {})
        self.networks = {
            name: ray.put(_network_blob(have.get(name) or load_for_registration(name)))
            for name in names
        }
        self._file_task = ray.remote(num_cpus=1, max_retries=1)(register_file)
        self._array_task = ray.remote(num_cpus=1, max_retries=1)(register_arrays)

    @staticmethod
    def _shipped() -> list[str]:
        from pcreg.registration.loading import SHIPPED_MODELS, WEIGHTS_DIR

        return [m for m in SHIPPED_MODELS if (WEIGHTS_DIR / f"{m}.pt").is_file()]

    def map(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[RegistrationResult]:
        """Register in-memory ``(src, ref)`` pairs over the cluster, largest first; results in
        input order. A pair whose registration fails raises its error here."""
        import ray

        order = largest_first([len(s) + len(r) for s, r in pairs])
        refs: dict[int, Any] = {}
        for i in order:
            src, ref = pairs[i]
            refs[i] = self._array_task.remote(
                np.asarray(src), np.asarray(ref), self.options, self.networks
            )
        return ray.get([refs[i] for i in range(len(pairs))])

    def submit_arrays(
        self,
        clouds: Sequence[np.ndarray],
        pairs: Sequence[tuple[int, int]],
        names: Sequence[str] | None = None,
        stored: dict[int, Any] | None = None,
    ) -> dict[Any, int]:
        """Start the tasks of in-memory pairs ``(src, ref)`` of indices into ``clouds`` (each
        cloud put in the object store once, however many pairs use it; ``names`` label them
        in errors), largest first: ``{ObjectRef: position in pairs}``; each ref gives a
        :class:`RegistrationResult`, or raises the pair's error. ``stored``: the object refs
        of clouds already put (``{index: ObjectRef}``), reused and added to, so that a second
        round of pairs puts no cloud twice."""
        import ray

        stored = {} if stored is None else stored
        for k in sorted({k for pair in pairs for k in pair} - set(stored)):
            stored[k] = ray.put(np.asarray(clouds[k]))
        label = [f"scan {k}" for k in range(len(clouds))] if names is None else list(names)
        out = {}
        for n in largest_first([len(clouds[i]) + len(clouds[j]) for i, j in pairs]):
            i, j = pairs[n]
            task = self._array_task.remote(
                stored[i], stored[j], self.options, self.networks, (label[i], label[j])
            )
            out[task] = n
        return out

    def submit(self, pairs: Sequence[ManifestPair]) -> dict[Any, ManifestPair]:
        """Start the tasks of manifest pairs, largest files first: ``{ObjectRef: pair}``."""

        def size(p: ManifestPair) -> int:
            return sum(os.path.getsize(f) if os.path.isfile(f) else 0 for f in (p.src, p.ref))

        out = {}
        for i in largest_first([size(p) for p in pairs]):
            job = pairs[i].to_json()
            out[self._file_task.remote(job, self.options, self.networks)] = pairs[i]
        return out

    def close(self) -> None:
        import ray

        try:
            if self._started:  # also a cluster whose ray.init was interrupted half-way
                self._started = False
                ray.shutdown()
                _reinstall_signal_handlers()
        finally:
            if self._reaper is not None:  # whatever of the local cluster is left goes now
                self._reaper.close()
                self._reaper = None

    def __enter__(self) -> RayRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _reinstall_signal_handlers() -> None:
    """Install this process's Python handlers of SIGTERM, SIGHUP and SIGINT again at the C
    level. ``ray.shutdown`` resets the process's own (C) handlers to the default while Python
    still reports its own: a SIGTERM after it, while ``pcreg map`` wrote its files, killed
    the process silently (no exit 143, no line) and left the temporary files (a hostile run,
    5 of 7 signals 15-16 s into a four-scan map; ``tests/batch/test_ray.py``)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for name in ("SIGTERM", "SIGHUP", "SIGINT"):
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        handler = signal.getsignal(signum)
        if handler is not None:  # None: installed outside Python, nothing to say about it
            signal.signal(signum, handler)


@contextlib.contextmanager
def _keep_sigterm_handler() -> Iterator[None]:
    """``ray.init`` with this process's SIGTERM handler kept.

    ``ray.init`` takes SIGTERM over: while it connects, ``sys.exit(15)``; for a local cluster,
    its node's handler (stop the cluster, ``sys.exit(1)``); and the C++ core worker's failure
    handler, which prints a stack dump (``*** SIGTERM received ...``) before dying. ``pcreg``
    answers SIGTERM with exit 143 and one line (:func:`pcreg._fs.signals_raise`, whose
    ``Terminated`` unwinds through :meth:`RayRunner.close`), and a library caller keeps its own
    handler: Ray's Python handlers are not installed, and the handler in place before (at
    the C level too) is put back afterwards. A SIGTERM in the last moments of ``ray.init``,
    after the core worker started and before it returns, still meets the C++ handler.
    """
    on_main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM) if on_main else None
    try:
        from ray._private import utils as ray_utils
    except ImportError:  # Ray's layout changed: its handlers are replaced afterwards only
        ray_utils = None
    install = getattr(ray_utils, "set_sigterm_handler", None)
    if install is not None:
        ray_utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        if install is not None:
            ray_utils.set_sigterm_handler = install
        if before is not None:
            signal.signal(signal.SIGTERM, before)


def failed_row(pair: ManifestPair, error: BaseException) -> dict:
    """The row of a pair whose task raised or whose worker died twice."""
    text = str(error).strip().splitlines()
    cause = type(getattr(error, "cause", None) or error).__name__
    return {
        "id": pair.id,
        "src": pair.src,
        "ref": pair.ref,
        "status": "failed",
        "registered": False,
        "error": f"{cause}: {text[-1] if text else ''}",
    }


def results_dir(out: str | os.PathLike[str]) -> Path:
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(out, "--out must be a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(out, f"cannot create the results directory ({err.strerror})") from None
    return out


def check_cluster_arguments(address: str | None, workers: int | None) -> None:
    """Refuse ``workers`` under 1 and a ``host:port`` ``address`` (or ``RAY_ADDRESS``) that
    nothing answers at, before a caller creates anything."""
    if workers is not None and workers < 1:
        raise InputError("workers", f"must be at least 1, got {workers}")
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        _check_reachable(address)


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Refuse a ``host:port`` cluster address nothing answers at (Ray itself retries such an
    address for minutes before it gives up). ``auto``, ``local`` and ``ray://`` client
    addresses are left to Ray."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
            pass
    except OSError as err:
        raise InputError(
            "address", f"no Ray cluster answers at {address} ({err.strerror or err})"
        ) from None
