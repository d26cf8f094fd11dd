"""``pcreg batch`` on a real two-node Ray cluster on this machine, bound to loopback only.

The cluster: ``ray start --head`` on 127.0.0.2 and a second node joined with ``ray start
--address`` on 127.0.0.3 (both in 127.0.0.0/8; Ray rewrites the literal 127.0.0.1 of a
multi-node cluster to the machine's outward address, so the test uses the next loopback
addresses), usage statistics off, a random auth token, one CPU each. Both run with ``--block``
in their own process groups, which the fixture kills at the end.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.ray

RAY = Path(sys.executable).with_name("ray")
PCREG = [sys.executable, "-m", "pcreg.cli"]
PAIRS = 4  # two per node: each node runs a pair and queues one


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _alive_nodes(address: str, env: dict) -> int:
    code = (
        f"import ray, logging; ray.init(address={address!r}, logging_level=logging.ERROR); "
        "print(sum(n['Alive'] for n in ray.nodes()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    return int(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else 0


def _started(proc: subprocess.Popen, log: Path, deadline: float) -> None:
    """Wait for ``ray start --block`` to print that its node runs (watching the log costs
    nothing; asking the cluster from a new Ray client costs 3-5 s of CPU a time)."""
    while "Ray runtime started." not in log.read_text(errors="replace"):
        assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
        assert time.monotonic() < deadline, log.read_text(errors="replace")[-2000:]
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``(address, env)`` of a two-node loopback cluster; stopped by its process ids."""
    env = {
        **os.environ,
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(16),
    }
    port = _free_port("127.0.0.2")
    address = f"127.0.0.2:{port}"
    logs = tmp_path_factory.mktemp("ray")
    common = ["--num-cpus=1", "--block", "--disable-usage-stats"]
    procs = [
        subprocess.Popen(
            [str(RAY), "start", "--head", "--node-ip-address=127.0.0.2", f"--port={port}",
             "--include-dashboard=false", *common],
            env=env, start_new_session=True, stdout=(logs / "head.log").open("w"),
            stderr=subprocess.STDOUT,
        )
    ]  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        _started(procs[0], logs / "head.log", deadline)
        procs.append(
            subprocess.Popen(
                [str(RAY), "start", f"--address={address}", "--node-ip-address=127.0.0.3",
                 *common],
                env=env, start_new_session=True, stdout=(logs / "node.log").open("w"),
                stderr=subprocess.STDOUT,
            )
        )  # fmt: skip
        _started(procs[1], logs / "node.log", deadline)
        while _alive_nodes(address, env) < 2:  # the node has joined the head's cluster
            assert time.monotonic() < deadline, (logs / "node.log").read_text()[-2000:]
            time.sleep(1)
        yield address, env
    finally:
        for proc in reversed(procs):  # each `ray start --block` leads its own process group
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:  # a node's processes leave on SIGTERM within a few seconds, or not
                    proc.wait(timeout=5)  # at all (20 s of grace ended in SIGKILL anyway)
                    break
                except subprocess.TimeoutExpired:
                    continue


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    """:data:`PAIRS` generated room pairs with their ground truth, as a JSON Lines manifest."""
    from pcreg.demo import _room_pair
    from pcreg.io import write_points

    root = tmp_path_factory.mktemp("pairs")
    rows = []
    for k in range(PAIRS):
        src, ref, gt = _room_pair(k)
        write_points(root / f"src{k}.ply", src)
        write_points(root / f"ref{k}.ply", ref)
        rows.append({"id": f"p{k}", "src": f"src{k}.ply", "ref": f"ref{k}.ply",
                     "gt": gt.reshape(16).tolist()})  # fmt: skip
    path = root / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _batch(manifest: Path, out: Path, address: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [*PCREG, "batch", str(manifest), "--out", str(out), "--model", "indoor",
         "--address", address],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _rows(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


def _check_every_pair_once_and_right(rows: list[dict]) -> None:
    assert sorted(r["id"] for r in rows) == [f"p{k}" for k in range(PAIRS)]  # once each
    for r in rows:
        assert r["status"] == "ok" and r["registered"], r
        assert r["rre_deg"] < 5.0 and r["rmse_m"] < 0.2, r  # against the ground truth


def test_batch_runs_on_a_two_node_cluster_and_resumes(cluster, manifest, tmp_path):
    address, env = cluster
    out = tmp_path / "out"
    proc = _batch(manifest, out, address, env)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    rows = _rows(out)
    _check_every_pair_once_and_right(rows)
    nodes = {r["worker"].rsplit(":", 1)[0] for r in rows}
    assert nodes == {"127.0.0.2", "127.0.0.3"}  # both nodes registered pairs
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["pairs"], summary["success"], summary["new"]) == (PAIRS, PAIRS, PAIRS)
    assert f"| success vs gt | {PAIRS} of {PAIRS} |" in stdout
    # the same command again: nothing left to do, nothing written twice
    again = _batch(manifest, out, address, env)
    stdout, _ = again.communicate(timeout=120)
    assert again.returncode == 0 and f"| pairs | {PAIRS} (0 this run) |" in stdout
    assert len(_rows(out)) == PAIRS


@pytest.mark.slow  # the cheap cover: a cut results log is read (test_manifest_results.py), a
# finished run re-run does nothing (the two-node test above)
def test_a_killed_driver_restarts_and_finishes_each_pair_once(cluster, manifest, tmp_path):
    address, env = cluster
    out = tmp_path / "out"
    proc = _batch(manifest, out, address, env)
    deadline = time.monotonic() + 300
    results = out / "results.jsonl"
    while not (results.is_file() and len(results.read_bytes().splitlines()) >= 2):
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.kill()  # SIGKILL of the driver mid-run
    proc.wait()
    first = len(_rows(out))
    assert 2 <= first < PAIRS, first  # interrupted with pairs left
    again = _batch(manifest, out, address, env)
    _, stderr = again.communicate(timeout=600)
    assert again.returncode == 0, stderr[-3000:]
    _check_every_pair_once_and_right(_rows(out))
    assert json.loads((out / "summary.json").read_text())["new"] == PAIRS - first


def _busy_worker() -> int | None:
    """The pid of a Ray worker process in the middle of a pair (Ray titles it after the
    task it runs)."""
    for entry in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if entry.read_bytes().startswith(b"ray::register_file"):
                return int(entry.parent.name)
        except OSError:
            continue
    return None


def test_a_worker_killed_mid_pair_has_its_pair_retried(cluster, manifest, tmp_path):
    address, env = cluster
    out = tmp_path / "out"
    proc = _batch(manifest, out, address, env)
    deadline = time.monotonic() + 300
    victim = None
    while victim is None:
        assert proc.poll() is None and time.monotonic() < deadline
        victim = _busy_worker()
        time.sleep(0.02)
    os.kill(victim, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    rows = _rows(out)
    _check_every_pair_once_and_right(rows)  # the pair it held was run again, and right
    assert all(not r["worker"].endswith(f":{victim}") for r in rows)
    assert np.isfinite([r["time_s"] for r in rows]).all()


def test_a_task_runs_its_node_cores_per_ray_cpu(cluster):
    """Each node offers Ray one CPU on this machine's cores, so a task may use them all (the
    registration then fits its threads to the cores that are free)."""
    from pcreg.engine.threads import usable_cores

    address, env = cluster
    code = (
        f"import ray, logging; ray.init(address={address!r}, logging_level=logging.ERROR); "
        "from pcreg.batch.runner import _node_threads; "
        "print(ray.get(ray.remote(num_cpus=1)(_node_threads).remote()))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout.strip().splitlines()[-1]) == usable_cores()  # cores // 1 CPU
