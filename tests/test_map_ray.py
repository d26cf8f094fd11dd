"""``pcreg map`` on Ray when a worker dies mid-pair: the task is retried once on another worker
(:class:`~pcreg.batch.runner.RayRunner`, ``max_retries=1``) and the map comes out whole. Slow
(a local Ray cluster starts); skipped without ``../shared``. Only a worker of the cluster this
test started (a descendant of this process) is killed, by its pid."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

TRAIN = Path(__file__).resolve().parents[1].parent / "shared" / "train_data"
BUNNY = TRAIN / "stanford_bunny_range_scans"

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def _kill_first_busy_worker(stop: threading.Event, killed: list[int]) -> None:
    """SIGKILL the first ``ray::register_arrays`` process under this one that has run half a
    second (mid-pair), once."""
    psutil = pytest.importorskip("psutil")
    me = psutil.Process(os.getpid())
    while not stop.is_set() and not killed:
        for proc in me.children(recursive=True):
            try:
                if "register_arrays" in " ".join(proc.cmdline()) and proc.cpu_times().user > 0.5:
                    os.kill(proc.pid, signal.SIGKILL)
                    killed.append(proc.pid)
                    return
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        time.sleep(0.1)


def test_a_killed_worker_s_pair_is_retried(tmp_path):
    import pcreg

    if not (BUNNY / "scans").is_dir():
        pytest.skip(f"{BUNNY} not found")
    meta = json.loads((BUNNY / "pairs.json").read_text())
    truth = {Path(s["file"]).stem: np.asarray(s["T_world_scan"]) for s in meta["scans"]}
    names = ("bun000", "bun045", "bun315")
    clouds = [np.load(BUNNY / "scans" / f"{n}.npy").astype(np.float64) for n in names]
    stop, killed = threading.Event(), []
    watcher = threading.Thread(target=_kill_first_busy_worker, args=(stop, killed), daemon=True)
    watcher.start()
    try:
        result = pcreg.map(clouds, workers=2)
    finally:
        stop.set()
        watcher.join(5)
    assert killed, "no worker was killed: the test did not test the retry"
    assert result.placed.all() and all(e.registered and e.kept for e in result.edges)
    for k, name in enumerate(names):
        gt = np.linalg.inv(truth[names[0]]) @ truth[name]
        err = np.linalg.inv(gt) @ result.poses[k]
        angle = np.degrees(np.arccos(np.clip((np.trace(err[:3, :3]) - 1) / 2, -1, 1)))
        assert angle < 1.0 and np.linalg.norm(err[:3, 3]) < 0.001


def test_a_sequence_s_loop_candidates_run_on_the_same_cluster():
    """``--sequence --candidates knn`` on Ray: the consecutive pairs first, then the loop
    candidates among their chain's revisits, in a second round on the same cluster. The
    bunny's six views around the table, in order: the last comes back to the first."""
    import pcreg

    if not (BUNNY / "scans").is_dir():
        pytest.skip(f"{BUNNY} not found")
    meta = json.loads((BUNNY / "pairs.json").read_text())
    truth = {Path(s["file"]).stem: np.asarray(s["T_world_scan"]) for s in meta["scans"]}
    names = ("bun000", "bun045", "bun090", "bun180", "bun270", "bun315")
    clouds = [np.load(BUNNY / "scans" / f"{n}.npy").astype(np.float64) for n in names]
    result = pcreg.map(clouds, workers=2, sequence=True, candidates="knn", neighbours=2)
    kinds = [e.kind for e in result.edges]
    assert kinds[:5] == ["sequence"] * 5 and set(kinds[5:]) == {"loop"}
    assert (5, 0) in {(e.src, e.ref) for e in result.edges if e.kind == "loop"}
    assert result.placed.all()
    for k, name in enumerate(names):
        gt = np.linalg.inv(truth[names[0]]) @ truth[name]
        err = np.linalg.inv(gt) @ result.poses[k]
        angle = np.degrees(np.arccos(np.clip((np.trace(err[:3, :3]) - 1) / 2, -1, 1)))
        assert angle < 2.0 and np.linalg.norm(err[:3, 3]) < 0.002
