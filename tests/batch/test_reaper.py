"""The watchdog of a local Ray cluster (pcreg/batch/reaper.py), without a cluster: what it
terminates, when, and that a cluster given by address gets none."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from pcreg.batch import reaper

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _holding(path: Path | None) -> subprocess.Popen:
    """A process that keeps ``path`` open (or nothing) until it is killed."""
    opened = f"f = open({str(path)!r}, 'a'); " if path else ""
    return subprocess.Popen([sys.executable, "-c", f"import time; {opened}time.sleep(120)"])


def _wait_open(proc: subprocess.Popen, path: Path) -> None:
    deadline = time.monotonic() + 30
    while proc.pid not in reaper.cluster_processes(str(path.parent)):
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_reap_terminates_the_processes_with_files_in_the_cluster_directory(tmp_path):
    cluster, elsewhere = tmp_path / "pcreg-cluster", tmp_path / "pcreg-cluster2"
    cluster.mkdir()
    elsewhere.mkdir()  # a sibling whose name starts the same: not the cluster's
    inside = _holding(cluster / "worker.out")
    outside = _holding(elsewhere / "worker.out")
    bystander = _holding(None)
    try:
        _wait_open(inside, cluster / "worker.out")
        assert reaper.reap(str(cluster)) == 1
        assert inside.wait(timeout=10) is not None
        assert outside.poll() is None and bystander.poll() is None
    finally:
        for proc in (inside, outside, bystander):
            proc.kill()
            proc.wait()


def test_the_watchdog_reaps_when_the_pipe_closes(tmp_path, monkeypatch):
    """Closed pipe (the driver exited, or was killed): the watchdog terminates the cluster's
    processes, leaves the driver alone, removes the cluster's directory, and exits."""
    monkeypatch.setattr(reaper, "_MAX_DIR", 4096)  # pytest's temporary directories are long
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    watch = reaper.ClusterReaper.start()
    assert watch is not None and watch.temp_dir.startswith(str(tmp_path))
    Path(watch.temp_dir).mkdir(parents=True)
    worker = _holding(Path(watch.temp_dir) / "raylet.out")
    try:
        _wait_open(worker, Path(watch.temp_dir) / "raylet.out")
        time.sleep(0.5)
        assert worker.poll() is None  # nothing happens while the driver is there
        watch.close()
        assert watch._proc.returncode == 0
        assert worker.wait(timeout=10) is not None
        assert not Path(watch.temp_dir).exists()  # its directory goes with it
    finally:
        worker.kill()
        worker.wait()


def test_a_cluster_given_by_address_gets_no_watchdog(monkeypatch):
    """``--address``: the user's cluster is connected to, never given a watchdog or a
    temporary directory of ours, so nothing of it is ever terminated by pcreg."""
    import ray

    from pcreg.batch import runner

    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: calls.append(kwargs))
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2})
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    monkeypatch.setattr(runner, "_check_reachable", lambda address: None)

    def no_watchdog() -> None:
        raise AssertionError("a watchdog for a cluster given by address")

    monkeypatch.setattr(reaper.ClusterReaper, "start", staticmethod(no_watchdog))
    options = runner.BatchOptions(method="fpfh-ransac")
    with runner.RayRunner(options, address="127.0.0.1:6379") as run:
        assert run._reaper is None
    assert calls and calls[0]["address"] == "127.0.0.1:6379" and "_temp_dir" not in calls[0]


def test_the_temporary_directory_fits_rays_socket_paths(monkeypatch):
    monkeypatch.setenv("RAY_TMPDIR", "/" + "x" * 60)
    assert reaper.ClusterReaper.start() is None  # Ray's own directory, no watchdog
