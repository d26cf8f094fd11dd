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
    "current_threads",
    "fitted_threads",
    "single_threaded_blas",
    "usable_cores",
]

F = TypeVar("F", bound=Callable)

_state = threading.local()  # depth of nested fitted_threads() in this thread


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


def current_threads() -> int:
    """The thread count for this process's own parallel work now: torch's (inside
    :func:`fitted_threads`, the fitted count), 1 where torch is not loaded."""
    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else 1


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


def _choose(ceiling: int) -> int:
    """Threads for the next registration: the cores not taken by other processes, at least
    one, at most ``ceiling`` (the caller's own setting)."""
    free = usable_cores() - busy_elsewhere()
    return max(1, min(ceiling, free))


@contextlib.contextmanager
def fitted_threads(load_torch: bool = True) -> Iterator[int]:
    """Run the body with torch's and Open3D's thread counts fitted to the free cores (each
    where it is loaded; ``load_torch`` imports torch first, for a body that will); yields the
    count. The caller's own setting is the ceiling and is restored on the way out. Nested uses
    keep the outer choice. ``PCREG_THREADS=N`` in the environment fixes the count instead
    (benchmarks; ``0`` keeps the caller's setting)."""
    if load_torch:
        importlib.import_module("torch")  # loaded here: its threads are set before the body

    torch = sys.modules.get("torch")
    o3d = sys.modules.get("open3d")
    if getattr(_state, "depth", 0) > 0:
        _state.depth += 1
        try:
            yield torch.get_num_threads() if torch is not None else usable_cores()
        finally:
            _state.depth -= 1
        return
    before = torch.get_num_threads() if torch is not None else usable_cores()
    o3d_before = o3d.utility.get_max_threads() if o3d is not None else None
    fixed = os.environ.get("PCREG_THREADS", "").strip()
    chosen = (int(fixed) or before) if fixed.isdigit() else _choose(before)
    _state.depth = 1
    try:
        if torch is not None and chosen != before:
            torch.set_num_threads(chosen)
        if o3d is not None and chosen < o3d_before:
            o3d.utility.set_max_threads(chosen)
        yield chosen
    finally:
        _state.depth = 0
        if torch is not None and torch.get_num_threads() != before:
            torch.set_num_threads(before)
        if o3d is not None and o3d.utility.get_max_threads() != o3d_before:
            o3d.utility.set_max_threads(o3d_before)
