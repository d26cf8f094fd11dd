"""What a user of ``pcreg register`` waits for: in-process and as a whole process, on an idle
machine and on a busy one, beside KISS-Matcher, on the real pairs of ``../shared/data``.

"Busy" is two single-threaded CPU-bound processes (``while True: pass``) that this benchmark
starts before and stops after each busy block; with them a 2-core machine gives each of three
single-threaded programs two thirds of a core, so fair sharing alone costs 1.5x. Every
variant runs under both conditions, which alternate round by round (idle first in even
rounds, busy first in odd ones) so that the machine's drift falls on both alike; within a
condition the variants take turns as in :mod:`pcreg.bench.pipeline`.

Variants:
- in-process (the model loaded, the clouds read from their files in each call):
  ``pcreg.register(src, ref)`` with its defaults (the shipped networks on ONNX Runtime); the
  same with ``PCREG_RUNTIME=torch`` (the networks on torch, as before the ONNX Runtime path);
  KISS-Matcher (``pip install kiss-matcher``,
  its default configuration at the setting's voxel, 5 cm indoors and 0.3 m outdoors) on the
  clouds read by pcreg's readers.
- whole process: ``pcreg register SRC REF --json`` from the shell, the same with
  ``PCREG_RUNTIME=torch``, the same answered by a running ``pcreg serve`` (started once for the
  whole benchmark, both models loaded), and a Python script that reads the files with numpy
  and runs KISS-Matcher (what a user of KISS-Matcher runs); peak resident memory of each
  process (for the served variant, the larger of the client's and the server's).

Every transform is scored against the pair's ground truth refit to the scans
(:mod:`pcreg.bench.refit`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import numpy as np

from pcreg.bench.pipeline import _say, _score_against_refit, _Served
from pcreg.bench.real_pairs import RealPair, real_pairs

__all__ = ["SPINNER", "benchmark_busy", "busy_machine", "format_busy_table"]

logger = logging.getLogger(__name__)

#: the competing load: one CPU-bound single-threaded process
SPINNER = "while True: pass"
CONDITIONS = ("idle", "busy")
KISS_VOXEL = {"indoor": 0.05, "outdoor": 0.3}  # metres, as FPFH + RANSAC in the pipeline table

_KISS_SCRIPT = """
import json
import sys
import numpy as np
import kiss_matcher
def read(path):
    if path.endswith(".npy"):
        return np.load(path)[:, :3].astype(np.float32)
    return np.fromfile(path, np.float32).reshape(-1, 4)[:, :3]
src, ref = read(sys.argv[1]), read(sys.argv[2])
matcher = kiss_matcher.KISSMatcher(kiss_matcher.KISSMatcherConfig(float(sys.argv[3])))
sol = matcher.estimate(src, ref)
T = np.eye(4)
T[:3, :3] = np.asarray(sol.rotation)
T[:3, 3] = np.asarray(sol.translation).reshape(3)
sys.stdout.write(json.dumps({"transform": T.tolist(), "registered": True}) + "\\n")
"""


@contextlib.contextmanager
def busy_machine(processes: int = 2, settle_s: float = 0.3) -> Iterator[list[int]]:
    """Run the body beside ``processes`` CPU-bound single-threaded processes (started, given
    ``settle_s`` to start spinning, and killed on the way out, errors included); yields
    their pids."""
    procs = [
        subprocess.Popen([sys.executable, "-c", SPINNER], stdin=subprocess.DEVNULL)
        for _ in range(processes)
    ]
    try:
        time.sleep(settle_s)
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def kiss_transform(src: np.ndarray, ref: np.ndarray, voxel: float) -> np.ndarray:
    """KISS-Matcher's ``T_ref_src`` (4, 4) float64 in its default configuration at ``voxel``
    metres (``src (N, 3)``, ``ref (M, 3)`` in metres)."""
    import kiss_matcher

    matcher = kiss_matcher.KISSMatcher(kiss_matcher.KISSMatcherConfig(voxel))
    sol = matcher.estimate(src.astype(np.float32), ref.astype(np.float32))
    out = np.eye(4)
    out[:3, :3] = np.asarray(sol.rotation)
    out[:3, 3] = np.asarray(sol.translation).reshape(3)
    return out


# ----------------------------------------------------------------------------- in-process
def _serve(pair: dict, variant: str) -> None:
    """A worker serving one in-process variant (the protocol of :class:`pcreg.bench.pipeline.
    _Served`; ``run idle`` / ``run busy`` lines): the cold call, then one timed call per
    line, the times sorted by condition; ``done`` writes them with the last transform."""
    p = RealPair(**pair)
    if variant == "kiss-matcher":
        from pcreg.io import read_points

        def call() -> tuple[np.ndarray, bool]:
            src, ref = read_points(p.src), read_points(p.ref)
            return kiss_transform(src, ref, KISS_VOXEL[p.setting]), True
    else:
        from pcreg.api import register

        def call() -> tuple[np.ndarray, bool]:
            result = register(p.src, p.ref)
            return result.transform, result.registered

    transform, registered = call()
    _say("ready")
    times: dict[str, list[float]] = {c: [] for c in CONDITIONS}
    for line in sys.stdin:
        words = line.split()
        if len(words) != 2 or words[0] != "run":
            break
        start = time.perf_counter()
        transform, registered = call()
        times[words[1]].append(time.perf_counter() - start)
        _say("ok")
    _say(json.dumps({"times": times, "transform": transform.tolist(), "registered": registered}))


_IN_PROCESS = {  # label -> (worker variant, extra environment)
    "pcreg (in-process)": ("pcreg", {}),
    "pcreg on torch (in-process)": ("pcreg", {"PCREG_RUNTIME": "torch"}),
    "KISS-Matcher (in-process)": ("kiss-matcher", {}),
}


# ----------------------------------------------------------------------------- whole process
# Linux keeps a process's peak resident memory across exec, and a child forked from this
# benchmark (hundreds of MiB) would report the benchmark's own peak: every timed command is
# started by a small launcher, and the launcher reports its child's peak and wall time.
_LAUNCHER = """
import resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.call(sys.argv[1:], stdin=subprocess.DEVNULL)
wall = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
sys.stderr.write(f"@@launcher {code} {wall} {peak}\\n")
"""


def _pcreg_command() -> list[str]:
    script = Path(sys.executable).with_name("pcreg")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pcreg"]


def _have_kiss() -> bool:
    try:
        import kiss_matcher  # noqa: F401
    except ImportError:
        return False
    return True


def _whole_commands(
    pair: RealPair, socket: Path | None = None
) -> dict[str, tuple[list[str], dict[str, str]]]:
    """label -> (command, environment) of the whole-process variants; ``socket``: a running
    ``pcreg serve``'s, for the served variant."""
    pcreg = [*_pcreg_command(), "register", pair.src, pair.ref, "--json"]
    kiss = [sys.executable, "-c", _KISS_SCRIPT, pair.src, pair.ref, str(KISS_VOXEL[pair.setting])]
    alone = {"PCREG_NO_SERVER": "1"}
    out = {
        "pcreg register (whole process)": (pcreg, alone),
        "pcreg register on torch (whole process)": (pcreg, {**alone, "PCREG_RUNTIME": "torch"}),
    }
    if socket is not None:
        out["pcreg register, `pcreg serve` running (whole process)"] = (
            pcreg, {"PCREG_SOCKET": str(socket), "PCREG_NO_SERVER": "0"}
        )  # fmt: skip
    if _have_kiss():
        out["KISS-Matcher script (whole process)"] = (kiss, {})
    return out


def _run_whole(command: list[str], env: dict[str, str]) -> tuple[float, float, np.ndarray, bool]:
    """Wall seconds, peak RSS (MiB), the printed transform and whether it registered, of one
    process (timed and measured by the launcher around it)."""
    proc = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *command],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )
    report = [ln for ln in proc.stderr.splitlines() if ln.startswith("@@launcher ")]
    if not report:
        raise RuntimeError(f"{command[:2]}: the launcher failed: {proc.stderr[-500:]}")
    code, wall, peak_kib = report[-1].split()[1:]
    text = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    record = json.loads(text) if text.startswith("{") else {}
    if "transform" not in record:  # nothing, or --json's error object
        why = f": {record['error']}" if "error" in record else ""
        raise RuntimeError(f"{command[:2]}: exit {code}, no result on stdout{why}")
    transform, registered = np.asarray(record["transform"]), bool(record["registered"])
    return float(wall), int(peak_kib) / 1024, transform, registered


@contextlib.contextmanager
def _server(directory: Path) -> Iterator[tuple[Path, subprocess.Popen]]:
    """A ``pcreg serve`` on a socket in ``directory`` (both models loaded before it listens);
    yields the socket and the server's process, and stops it on the way out."""
    socket = directory / "serve.sock"
    proc = subprocess.Popen(
        [*_pcreg_command(), "serve", "--socket", str(socket), "--idle-timeout", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while not socket.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"pcreg serve did not start (exit {proc.poll()})")
            time.sleep(0.1)
        yield socket, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _peak_of(pid: int) -> float | None:
    """A running process's peak resident memory in MiB (``VmHWM``), None where unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


# ----------------------------------------------------------------------------- the benchmark
def benchmark_busy(shared_data: Path, runs: int = 5, settings: tuple[str, ...] = ()) -> dict:
    """Idle and busy times of every variant on every real pair (of ``settings``, default all);
    progress on stderr."""
    import tempfile

    from tqdm.auto import tqdm

    pairs = [p for p in real_pairs(shared_data) if not settings or p.setting in settings]
    if not _have_kiss():
        logger.warning(
            "kiss-matcher is not installed: its rows are left out (pip install kiss-matcher)"
        )
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="pcreg-busy-") as tmp, _server(Path(tmp)) as server:
        for pair in tqdm(pairs, desc="busy-machine benchmark", unit="pair"):
            rows += _measure_pair(pair, runs, server)
    refit = _score_against_refit(pairs, rows)
    return {"rows": rows, "runs": runs, "refit": refit, "cores": os.cpu_count()}


def _measure_pair(pair: RealPair, runs: int, server: tuple[Path, subprocess.Popen]) -> list[dict]:
    served: dict[str, _Served] = {}
    whole = _whole_commands(pair, server[0])
    records: dict[str, dict] = {label: {c: [] for c in CONDITIONS} for label in whole}
    peaks: dict[str, list[float]] = {label: [] for label in whole}
    last: dict[str, tuple[np.ndarray, bool]] = {}
    try:
        for label, (variant, env) in _IN_PROCESS.items():
            if variant == "kiss-matcher" and not _have_kiss():
                continue
            call = f"from pcreg.bench import busy as b; b._serve({asdict(pair)!r}, {variant!r})"
            served[label] = _Served(pair, label, None, True, call=call, env=env)
        labels = [*served, *whole]
        for r in range(runs):
            for condition in CONDITIONS if r % 2 == 0 else CONDITIONS[::-1]:
                with busy_machine() if condition == "busy" else contextlib.nullcontext():
                    for k in range(len(labels)):
                        label = labels[(r + k) % len(labels)]
                        if label in served:
                            served[label].run(condition)
                            continue
                        wall, peak, transform, ok = _run_whole(*whole[label])
                        if "pcreg serve" in label and server[1].poll() is not None:
                            # its client would have run the command itself: not a served time
                            raise RuntimeError(f"pcreg serve exited ({server[1].returncode})")
                        records[label][condition].append(wall)
                        peaks[label].append(peak)
                        last[label] = (transform, ok)
        out = []
        for label, s in served.items():
            got = s.finish()
            out.append(_row(pair, label, got["times"], got["transform"], got["registered"], None))
        for label, times in records.items():
            transform, ok = last[label]
            peak = max(peaks[label])
            if "pcreg serve" in label:  # the client's, and the server's own (both models)
                peak = max(peak, _peak_of(server[1].pid) or 0.0)
            out.append(_row(pair, label, times, transform.tolist(), ok, peak))
        return out
    finally:
        for s in served.values():
            s.kill()


def _row(pair, label, times, transform, registered, peak) -> dict:
    idle, busy = statistics.median(times["idle"]), statistics.median(times["busy"])
    return {
        "pair": pair.name, "setting": pair.setting, "variant": label, "times": times,
        "idle_s": idle, "busy_s": busy, "ratio": busy / idle, "transform": transform,
        "registered": registered, "peak_mib": peak,
    }  # fmt: skip


def format_busy_table(results: dict, command: str) -> str:
    """Markdown: per pair and variant, idle and busy medians, their ratio and the accuracy."""
    from pcreg.bench.report import machine_description

    lines = [
        "## On a busy machine: in-process and whole process, vs KISS-Matcher",
        "",
        f"Machine: {machine_description()}.",
        f"Median of {results['runs']} calls per condition. Busy: two CPU-bound "
        "single-threaded processes beside the measurement, started and stopped by the "
        "benchmark (on 2 cores fair sharing alone costs 1.5x); the conditions alternate round "
        "by round and the variants take turns within each. In-process: `pcreg.register(src, "
        "ref)` with its defaults (the model loaded; the files read in each call; the shipped "
        "networks on ONNX Runtime, no torch). Whole process: `pcreg register SRC REF --json` "
        'from the shell. "on torch": the same with `PCREG_RUNTIME=torch`, the networks on torch '
        'as before the ONNX Runtime path. "`pcreg serve` running": the same '
        "command answered by a server started once for the benchmark (`pcreg serve`, both "
        "models loaded, serving every pair in turn); its peak memory is the server's so far. "
        "KISS-Matcher: its default configuration at 5 cm (3DMatch) / 0.3 m (KITTI); whole "
        "process: a Python script that reads the files with numpy. Errors against the ground "
        "truth refit to the scans (`pcreg.bench.refit`).",
        "",
        f"Command: `{command}`",
        "",
        "| pair | variant | idle s | busy s | busy / idle | registered | RRE deg | RTE m | "
        "peak RSS MiB |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in results["rows"]:
        peak = f"{r['peak_mib']:.0f}" if r["peak_mib"] is not None else "-"
        lines.append(
            f"| {r['pair']} | {r['variant']} | {r['idle_s']:.3f} | {r['busy_s']:.3f} | "
            f"{r['ratio']:.2f}x | {'yes' if r['registered'] else 'no'} | "
            f"{r.get('rre_deg_refit', float('nan')):.2f} | "
            f"{r.get('rte_m_refit', float('nan')):.3f} | {peak} |"
        )
    return "\n".join(lines)
