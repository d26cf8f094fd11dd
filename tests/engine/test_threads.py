"""Thread choice under contention (pcreg/engine/threads.py): the counts read from /proc, the
choice from them, and that a registration runs with the chosen count and restores the
caller's."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from pcreg.engine import threads

LINUX = Path("/proc/stat").exists() and hasattr(os, "sched_getaffinity")


def test_running_total_reads_procs_running(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  1 2 3\nctxt 99\nprocs_running 7\nprocs_blocked 0\n")
    assert threads._running_total(stat) == 7
    stat.write_text("cpu  1 2 3\n")
    assert threads._running_total(stat) is None
    assert threads._running_total(tmp_path / "missing") is None


def test_running_here_counts_state_r_after_the_name(tmp_path: Path) -> None:
    # a thread's name may hold spaces and parentheses; the state follows the last ')'
    names = {"1": "1 (python) R 0", "2": "2 (a) b (S) c) S 1", "3": "3 (omp R) R 1", "4": "4 (x) D"}
    for tid, text in names.items():
        (tmp_path / tid).mkdir()
        (tmp_path / tid / "stat").write_text(text)
    assert threads._running_here(tmp_path) == 2
    assert threads._running_here(tmp_path / "missing") == 1


def test_choice_takes_the_free_cores(monkeypatch) -> None:
    monkeypatch.setattr(threads, "usable_cores", lambda: 4)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    for busy, ceiling, expected in [(0, 4, 4), (1, 4, 3), (3, 4, 1), (9, 4, 1), (0, 2, 2)]:
        monkeypatch.setattr(threads, "busy_elsewhere", lambda busy=busy: busy)
        assert threads._choose(ceiling) == expected
    # `taskset -c 0,1` on a 64-core machine where 10 other threads run: both cores usable
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(threads, "busy_elsewhere", lambda: 10)
    assert threads._choose(8) == 2


def test_one_thread_is_chosen_without_reading_the_load(monkeypatch) -> None:
    """A batch worker runs one thread: nothing to fit, so the ~2 ms load reading is skipped."""

    def reading() -> int:
        raise AssertionError("the load was read")

    monkeypatch.setattr(threads, "busy_elsewhere", reading)
    assert threads._choose(1) == 1
    with pytest.raises(AssertionError, match="was read"):
        threads._choose(2)


def test_a_reading_taken_ahead_serves_the_next_choice_once(monkeypatch) -> None:
    """A Ray worker reads the load between pairs; the next registration uses that reading
    (once, and only while it is fresh) instead of one taken as it starts."""
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(threads, "_ahead", None)
    monkeypatch.setattr(threads, "busy_elsewhere", lambda: 0)  # quiet between pairs
    threads.read_load_ahead()
    monkeypatch.setattr(threads, "busy_elsewhere", lambda: 1)  # the burst at the next start
    assert threads._choose(2) == 2  # the reading taken ahead
    assert threads._choose(2) == 1  # used up: read now
    threads.read_load_ahead()  # reads 1 busy thread
    monkeypatch.setattr(threads, "busy_elsewhere", lambda: 0)
    assert threads._choose(2) == 1
    clock = [100.0]
    monkeypatch.setattr(threads, "_clock", lambda: clock[0])
    monkeypatch.setattr(threads, "busy_elsewhere", lambda: 1)
    threads.read_load_ahead()
    clock[0] += threads.AHEAD_S + 0.1  # stale: read now
    monkeypatch.setattr(threads, "busy_elsewhere", lambda: 0)
    assert threads._choose(2) == 2


def _spinners(n: int) -> list[subprocess.Popen]:
    code = "while True: pass"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


@pytest.mark.skipif(not LINUX, reason="reads /proc")
def test_busy_elsewhere_sees_two_spinning_processes() -> None:
    procs = _spinners(2)
    try:
        time.sleep(0.5)  # both started and spinning
        assert threads.busy_elsewhere() >= 2
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_busy_elsewhere_is_the_median_less_this_process(monkeypatch) -> None:
    """One short-lived process in five readings is noise; this process's own running
    threads (spinning OpenMP workers) are not load."""
    totals = iter([4, 12, 4, 4, 3])
    monkeypatch.setattr(threads, "_running_total", lambda: next(totals))
    monkeypatch.setattr(threads, "_running_here", lambda: 2)
    assert threads.busy_elsewhere(interval_s=0) == 2
    monkeypatch.setattr(threads, "_running_total", lambda: None)  # no /proc: no load known
    assert threads.busy_elsewhere(interval_s=0) == 0


@pytest.fixture
def two_threads(monkeypatch):
    """torch and Open3D at two threads (restored after), every core of a 2-core machine
    free unless a test says otherwise."""
    import open3d as o3d

    torch_before, o3d_before = torch.get_num_threads(), o3d.utility.get_max_threads()
    torch.set_num_threads(2)
    o3d.utility.set_max_threads(2)
    monkeypatch.delenv("PCREG_THREADS", raising=False)
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(threads, "busy_elsewhere", lambda: 0)
    yield o3d
    torch.set_num_threads(torch_before)
    o3d.utility.set_max_threads(o3d_before)


def test_fitted_threads_sets_and_restores(monkeypatch, two_threads) -> None:
    o3d = two_threads
    monkeypatch.setattr(threads, "busy_elsewhere", lambda: 2)  # every core taken
    with threads.fitted_threads() as n:
        assert n == 1
        assert torch.get_num_threads() == 1
        assert o3d.utility.get_max_threads() == 1
        with threads.fitted_threads() as inner:  # nested: the outer choice stands
            assert inner == 1 and torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2 and o3d.utility.get_max_threads() == 2
    with pytest.raises(RuntimeError), threads.fitted_threads():  # restored on errors too
        raise RuntimeError
    assert torch.get_num_threads() == 2
    monkeypatch.setenv("PCREG_THREADS", "0")  # the caller's setting, whatever the load
    with threads.fitted_threads() as n:
        assert n == 2 == torch.get_num_threads()


def test_overlapping_uses_from_two_threads_restore_the_callers_setting(
    monkeypatch, two_threads
) -> None:
    """The counts are process-wide: A enters (1 thread), B enters, A leaves, B leaves. B must
    not take A's 1 as the caller's setting and leave the process on one thread."""
    import threading

    monkeypatch.setattr(threads, "busy_elsewhere", lambda: 2)
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        with threads.fitted_threads() as n:
            seen["a"] = n
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def b():
        a_in.wait(10)
        with threads.fitted_threads() as n:
            seen["b"] = n
            b_in.set()
            a_out.wait(10)
            seen["b after a"] = torch.get_num_threads()

    workers = [threading.Thread(target=a), threading.Thread(target=b)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(20)
    assert seen == {"a": 1, "b": 1, "b after a": 1}  # A's exit did not restore under B
    assert torch.get_num_threads() == 2  # the last one out restored the caller's 2


def test_registration_runs_with_the_fitted_count(monkeypatch, room_pair, two_threads) -> None:
    """The pipeline's call runs inside fitted_threads: with both cores free it uses two
    threads, with both taken one, and it gives the transform of the two-thread run (to float
    rounding: the reductions split differently); the caller's setting is restored."""
    from pcreg.registration.pipeline import Registration

    src, ref, gt = room_pair
    pipe = Registration("indoor", method="geotransformer")
    seen: list[int] = []
    inner = Registration._register

    def spy(self, *args, **kwargs):
        seen.append(torch.get_num_threads())
        return inner(self, *args, **kwargs)

    monkeypatch.setattr(Registration, "_register", spy)
    free = pipe(src, ref)
    monkeypatch.setattr(threads, "busy_elsewhere", lambda: 2)
    busy = pipe(src, ref)
    assert seen == [2, 1]
    assert torch.get_num_threads() == 2
    np.testing.assert_allclose(busy.transform, free.transform, atol=1e-4)
    assert busy.registered and free.registered
    assert busy.errors(gt, src)["rre_deg"] < 2.0


_NO_TORCH = """
import os, sys
from pcreg.engine import threads
threads.usable_cores = lambda: 2
os.cpu_count = lambda: 2
threads.busy_elsewhere = lambda: 0
os.environ.pop("PCREG_THREADS", None)
with threads.fitted_threads(()) as n:  # nothing loaded: the usable cores are the ceiling
    assert n == 2 == threads.current_threads(), n
threads.set_thread_ceiling(1)  # a batch worker's share of its node
with threads.fitted_threads(()) as n:
    assert n == 1 == threads.current_threads(), n
threads.set_thread_ceiling(None)
assert threads.current_threads() == 1  # outside a fitted region, without torch
threads.busy_elsewhere = lambda: 2  # every core taken
with threads.fitted_threads(()) as n:
    assert n == 1
    import torch  # a registration that falls back to torch part way through
    torch.set_num_threads(2)
    threads.fit_late()
    assert torch.get_num_threads() == 1
assert torch.get_num_threads() == 2  # restored with the rest
print("ok", "torch" in sys.modules)
"""

_LANES = """
import os
from pcreg.engine import threads
threads.usable_cores = lambda: 2
os.cpu_count = lambda: 2
os.environ.pop("PCREG_THREADS", None)
seen = []
cases = [(0, None, ""), (2, None, ""), (2, 1, ""), (0, None, "1"), (2, None, "2")]
for busy, ceiling, fixed in cases:
    threads.busy_elsewhere = lambda b=busy: b
    threads.set_thread_ceiling(ceiling)
    if fixed:
        os.environ["PCREG_THREADS"] = fixed
    with threads.fitted_threads(()) as n:
        seen.append((n, threads.current_lanes()))
    os.environ.pop("PCREG_THREADS", None)
threads.set_thread_ceiling(None)
seen.append(threads.current_lanes())  # outside a fitted region: current_threads (1, no torch)
os.environ["PCREG_THREADS"] = "8"  # fixed: the lanes still at most MAX_LANES
with threads.fitted_threads(()) as n:
    seen.append((n, threads.current_lanes()))
os.environ.pop("PCREG_THREADS")
import torch  # loaded (a fallback did it): a worker's ceiling of one still holds
torch.set_num_threads(2)
threads.set_thread_ceiling(1)
for busy in (0, 2):
    threads.busy_elsewhere = lambda b=busy: b
    with threads.fitted_threads(()) as n:
        seen.append((n, threads.current_lanes()))
threads.set_thread_ceiling(None)
from pcreg.registration.onnx_network import _Lanes  # the network's lanes follow the count
threads.busy_elsewhere = lambda: 2
with threads.fitted_threads(()):
    with _Lanes() as lanes:
        seen.append(lanes.pool is not None)
threads.set_thread_ceiling(1)
with threads.fitted_threads(()):
    with _Lanes() as lanes:
        seen.append(lanes.pool is not None)
print(seen)
"""


def test_lanes_follow_the_ceiling_not_the_load():
    """Barrier-free lanes (the two clouds side by side) run two wherever the registration
    may use two cores, busy neighbours or not, while the fitted thread count (torch's
    regions, the k-d trees' workers) drops to the free cores; a worker's ceiling of one
    holds both, torch loaded or not, and ``PCREG_THREADS`` fixes both (the lanes at most
    two). The network's lanes (``_Lanes``) are the count's."""
    env = {k: v for k, v in os.environ.items() if k != "PCREG_THREADS"}
    out = subprocess.run([sys.executable, "-c", _LANES], capture_output=True, text=True, env=env)
    expected = "[(2, 2), (1, 2), (1, 1), (1, 1), (2, 2), 1, (8, 2), (1, 1), (1, 1), True, False]"
    assert out.stdout.strip() == expected, out.stdout + out.stderr[-2000:]


def test_without_torch_the_ceiling_is_the_cores_or_the_workers_share_and_late_torch_is_fitted():
    """The ONNX Runtime path fits its lanes without torch loaded; torch imported inside the
    region (a fallback) is fitted too, and restored."""
    env = {k: v for k, v in os.environ.items() if k != "PCREG_THREADS"}
    out = subprocess.run([sys.executable, "-c", _NO_TORCH], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "ok True", out.stderr[-2000:]
