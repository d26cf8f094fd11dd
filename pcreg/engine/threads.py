"""How many CPU threads the registration path uses: BLAS held to one, and torch / Open3D fitted
to the cores that are free when a registration starts.

**BLAS.** numpy's OpenBLAS splits even small matrix products over its own worker threads, and
those threads then busy-wait for more work (OpenBLAS' thread timeout) on the very cores torch's
OpenMP threads need next. The registration path does such products between torch calls: the
``(N, 3) @ (3, 3)`` rotations of clouds and the Manhattan frame's normal votes. Measured on the
2-core AMD EPYC VM (the real 3DMatch pair 0<-5): the cube ranking that follows the frames
took 75-140 ms inside a registration against 34 ms with BLAS held to one thread, and the
products themselves are far too small to gain from a second thread. :func:`single_threaded_blas`
applies the limit only inside the decorated calls (threadpoolctl restores the caller's setting
on the way out).

**Free cores.** torch runs each operator as an OpenMP parallel region whose threads meet at a
barrier; a region ends when its slowest thread does. With another process running on one of
the two cores, one of torch's two threads waits for its time slice (milliseconds) at every one
of the thousands of regions of a registration, while the other spins at the barrier: issue #30
measured a 3DMatch registration at 0.98 s with one thread against 10.8-15.7 s with torch's
default two under a load average of 3.5-6. :func:`fitted_threads` counts the threads of other
processes that are ready to run when a registration starts (the kernel's ``procs_running``
less this process's own running threads) and gives torch and Open3D only the cores left over,
at least one; on an idle machine nothing changes. BENCHMARKS.md "On a busy machine" has the
measurement.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from threadpoolctl import threadpool_limits

__all__ = [
    "busy_elsewhere",
    "current_lanes",
    "current_threads",
    "fit_late",
    "fitted_threads",
    "read_load_ahead",
    "set_thread_ceiling",
    "single_threaded_blas",
    "thread_ceiling",
    "usable_cores",
]

F = TypeVar("F", bound=Callable)

# fitted_threads(): uses in progress (nested or from several Python threads), the count they
# share, and what the first one saved to restore
_lock = threading.Lock()
_users = 0
_chosen = 1
_lanes = 1
_saved: tuple = (None, 1, None, None)

#: the most coarse lanes a registration runs side by side (:func:`current_lanes`)
MAX_LANES = 2


def single_threaded_blas(func: F) -> F:
    """Decorator: run ``func`` with every loaded BLAS (numpy's, scipy's) limited to one
    thread; torch's own thread pool is untouched."""
    return threadpool_limits.wrap(limits=1, user_api="blas")(func)


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask, which containers and ``taskset``
    narrow; ``os.cpu_count()`` where the platform has no mask)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: the most threads a registration may use where torch is not loaded (None: the usable
#: cores); a Ray worker sets its share of the node (:func:`set_thread_ceiling`)
_ceiling: int | None = None


def set_thread_ceiling(threads: int | None) -> None:
    """The most threads this process's registrations use when torch is not loaded (torch's
    own setting is the ceiling where it is): a batch worker's share of its node."""
    global _ceiling
    _ceiling = None if threads is None else max(1, int(threads))


def thread_ceiling() -> int:
    """The ceiling :func:`fitted_threads` fits under: torch's thread count where torch is
    loaded, else :func:`set_thread_ceiling`'s, else the usable cores."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return int(torch.get_num_threads())
    return _ceiling if _ceiling is not None else usable_cores()


def current_threads() -> int:
    """The thread count for this process's own parallel work now: inside
    :func:`fitted_threads` the fitted count, else torch's where torch is loaded, else 1."""
    with _lock:
        if _users > 0:
            return _chosen
    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else 1


def current_lanes() -> int:
    """How many coarse, independent tasks this process's registration runs side by side now
    (the two clouds' pyramids and backbones, the orientation search's hypotheses, an ICP
    beside a network pass): inside :func:`fitted_threads` the caller's ceiling (torch's
    thread count where torch is loaded, and never above a worker's
    :func:`set_thread_ceiling`), at most :data:`MAX_LANES`, whatever the load
    (``PCREG_THREADS=N`` fixes it as it fixes the threads, at most :data:`MAX_LANES` too);
    else :func:`current_threads`.

    Unlike torch's or Open3D's parallel regions, such lanes never meet at a barrier: each
    waits only for its own work, so a busy neighbour slows a lane by its share of a core and
    no more, and two lanes get two of the scheduler's shares where one lane gets one.
    Measured on the 2-core AMD EPYC, a whole ``pcreg register`` beside two CPU-bound
    single-threaded processes, this rule against the load-fitted count (the code before,
    alternating in one run, medians of 5): KITTI 00 scans 94 -> 95 2.85 -> 2.66 s, 198 ->
    199 2.59 -> 2.40 s, 3DMatch 0 <- 5 1.28 -> 1.05 s; idle unchanged (BENCHMARKS.md, "On a
    busy machine")."""
    with _lock:
        if _users > 0:
            return _lanes
    return current_threads()


def _running_total(stat: Path = Path("/proc/stat")) -> int | None:
    """The kernel's count of threads running or ready to run, machine-wide (``procs_running``
    in ``/proc/stat``); None where there is no such file (macOS, Windows)."""
    try:
        with stat.open("rb") as f:
            for line in f:
                if line.startswith(b"procs_running"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _running_here(tasks: Path = Path("/proc/self/task")) -> int:
    """This process's threads that are running or ready to run (state ``R``): the caller, plus
    OpenMP / BLAS workers still spinning after the last parallel region."""
    count = 0
    try:
        entries = list(tasks.iterdir())
    except OSError:
        return 1
    for entry in entries:
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:  # the thread ended meanwhile
            continue
        # "pid (comm) S ...": the name may hold spaces or parentheses, the state follows the
        # last closing parenthesis
        if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"R":
            count += 1
    return max(count, 1)


def busy_elsewhere(samples: int = 5, interval_s: float = 0.0005) -> int:
    """Threads of other processes running or ready to run now: the median of ``samples``
    readings ``interval_s`` apart (about 3 ms in all), 0 where the platform cannot tell."""
    readings = []
    for i in range(samples):
        total = _running_total()
        if total is None:
            return 0
        readings.append(max(total - _running_here(), 0))
        if i + 1 < samples:
            time.sleep(interval_s)
    return int(statistics.median_low(readings))


#: how long a reading taken ahead (:func:`read_load_ahead`) stands in for one taken at the
#: call: a Ray worker's next pair follows within milliseconds (3 ms median between pairs on
#: the 2-core EPYC), plus reading its files
AHEAD_S = 0.5
_ahead: tuple[float, int] | None = None  # (_clock(), threads busy elsewhere)
_clock = time.monotonic  # the clock of the readings taken ahead (tests replace it)


def read_load_ahead() -> None:
    """Read the load now, for the next registration that starts within :data:`AHEAD_S`
    seconds, instead of when it starts: for a caller that knows the next start is a noisy
    moment. A Ray worker's next pair arrives together with a burst of work in Ray's own
    processes (the driver taking the last result, the raylet, the GCS), which a reading
    taken then counts as load. Measured on the 2-core AMD EPYC, one Ray worker (a ceiling of
    two threads) on the generated indoor set: 0.90-0.93x the pairs/s of the same pipeline in a
    plain worker process when each registration read the load as it started, 0.99x with two
    threads fixed; the reading between pairs (the worker's last act on the previous pair,
    while the driver still waits for it) sees the cores the other processes leave free."""
    global _ahead
    _ahead = (_clock(), busy_elsewhere())


def _busy_now() -> int:
    """Threads busy elsewhere: the reading taken ahead when it is fresh (used once), else one
    taken now."""
    global _ahead
    ahead, _ahead = _ahead, None
    if ahead is not None and _clock() - ahead[0] <= AHEAD_S:
        return ahead[1]
    return busy_elsewhere()


def _choose(ceiling: int) -> int:
    """Threads for the next registration: the cores not taken by other processes, at least
    one, at most ``ceiling`` (the caller's own setting). The load is machine-wide, so the
    free cores are the machine's less the load, within this process's affinity mask
    (``taskset``, a container's cpuset); the load is the reading taken just before
    (:func:`read_load_ahead`) when there is a fresh one, else one taken now. A ceiling of one
    (a batch worker of one thread) is the answer without reading the load: the reading sleeps
    ~2 ms, 0.5-1 % of a room's registration."""
    if ceiling <= 1:
        return 1
    free = min(usable_cores(), (os.cpu_count() or 1) - _busy_now())
    return max(1, min(ceiling, free))


def _o3d_threads(o3d) -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """Open3D's getter and setter of its thread limit (0.20 and later; None before)."""
    utility = getattr(o3d, "utility", None)
    get = getattr(utility, "get_max_threads", None)
    put = getattr(utility, "set_max_threads", None)
    return (get, put) if get is not None and put is not None else None


def fit_late() -> None:
    """Inside :func:`fitted_threads`, fit torch and Open3D if they were imported after it
    began (a registration that fell back to torch, or to FPFH + RANSAC, part way through);
    they are restored with the others when the last use ends. Outside it, nothing."""
    global _saved
    with _lock:
        if _users == 0:
            return
        torch, before, o3d_api, o3d_before = _saved
        if torch is None and "torch" in sys.modules:
            torch = sys.modules["torch"]
            before = torch.get_num_threads()
            if _chosen != before:
                torch.set_num_threads(_chosen)
        if o3d_api is None and "open3d" in sys.modules:
            o3d_api = _o3d_threads(sys.modules["open3d"])
            if o3d_api is not None:
                o3d_before = o3d_api[0]()
                if _chosen < o3d_before:
                    o3d_api[1](_chosen)
        _saved = (torch, before, o3d_api, o3d_before)


@contextlib.contextmanager
def fitted_threads(load: tuple[str, ...] = ("torch", "open3d")) -> Iterator[int]:
    """Run the body with torch's and Open3D's thread counts fitted to the free cores; yields
    the count. ``load``: the libraries to import first, those the body will use (one that is
    not loaded yet could not be fitted). The thread counts are process-wide, so the first
    of overlapping uses (nested, or from several Python threads) chooses and saves the
    caller's setting, which is the ceiling, and the last one out restores it.
    ``PCREG_THREADS=N`` in the environment fixes the count instead (benchmarks; ``0`` keeps
    the caller's setting)."""
    for name in load:  # loaded here: their threads are set before the body runs
        importlib.import_module(name)
    global _users, _chosen, _lanes, _saved
    with _lock:
        if _users == 0:
            torch, o3d = sys.modules.get("torch"), sys.modules.get("open3d")
            o3d_api = _o3d_threads(o3d) if o3d is not None else None
            before = torch.get_num_threads() if torch is not None else thread_ceiling()
            o3d_before = o3d_api[0]() if o3d_api is not None else None
            # a worker's share (set_thread_ceiling) holds where torch is loaded too: torch
            # imported by a fallback starts at its own default count
            ceiling = min(before, _ceiling) if _ceiling is not None else before
            fixed = os.environ.get("PCREG_THREADS", "").strip()
            _chosen = (int(fixed) or before) if fixed.isdigit() else _choose(ceiling)
            _lanes = max(1, min(MAX_LANES, _chosen if fixed.isdigit() else ceiling))
            _saved = (torch, before, o3d_api, o3d_before)
            if torch is not None and _chosen != before:
                torch.set_num_threads(_chosen)
            if o3d_api is not None and _chosen < o3d_before:
                o3d_api[1](_chosen)
        _users += 1
        chosen = _chosen
    try:
        yield chosen
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                torch, before, o3d_api, o3d_before = _saved
                if torch is not None and torch.get_num_threads() != before:
                    torch.set_num_threads(before)
                if o3d_api is not None and o3d_api[0]() != o3d_before:
                    o3d_api[1](o3d_before)
