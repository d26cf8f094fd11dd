"""End-to-end registration latency, peak memory and batch throughput on the real pairs of
``../shared/data``: the network alone and followed by ICP, with Open3D FPFH + RANSAC (and + ICP)
timed in the same run on the same pairs. Every transform is scored against the published ground
truth and against that truth refit to the scans (:mod:`pcreg.bench.refit`).

Latency is ``pcreg.register(src_path, ref_path, ...)``: reading both files, the input checks,
voxelisation / neighbor search, the network (or FPFH + RANSAC) and, where asked, ICP -- what a
user waits for. Each (pair, method) runs in its own subprocess so that its peak resident memory
(``ru_maxrss``) is its own; the first call (which also loads the model) is reported as "cold",
then ``runs`` calls give the median. The methods of a pair take turns, one call each per round
(:func:`_interleaved`): on a shared machine whose speed drifts by 15 % over minutes, timing one
method's calls after the other's let that drift decide ratios of 0.9-1.1. For the network the
median call is split into stages with forward hooks: read + checks, subsampling + neighbors,
backbone, transformer, optimal transport, matching + LGR.

Throughput: the pairs of one setting, four at a time, registered one by one (batch 1), in
one process (``Registration.batch``, batch 4) and on a local Ray cluster of 1 and 2 CPUs;
pairs per second of the pipeline alone (the clouds are already in memory).
"""

from __future__ import annotations

import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from pcreg.bench.real_pairs import RealPair, real_pairs
from pcreg.bench.stages import MethodTimer, ModuleTimer

__all__ = ["benchmark_pipeline", "format_pipeline_tables"]

logger = logging.getLogger(__name__)

FPFH = "fpfh-ransac"


# ----------------------------------------------------------------------------- subprocesses
def _peak_mib() -> float:
    """This process's peak resident memory in MiB (``VmHWM``, see
    :func:`pcreg.engine.heap.peak_rss_mib`; ``ru_maxrss`` where ``/proc`` is missing)."""
    from pcreg.engine.heap import peak_rss_mib

    peak = peak_rss_mib()
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _LatencyCase:
    """One (pair, method) in this process: the cold call on construction, then one timed call
    per :meth:`run`; :meth:`summary` gives the median and the median call's stage split."""

    def __init__(self, pair: dict, method: str, model: str, icp: bool) -> None:
        from pcreg.api import pipeline, register

        self.pair, self.method, self.model, self.icp = RealPair(**pair), method, model, icp
        self._register = register
        self.stages = None
        if method == "geotransformer":
            from pcreg.registration.onnx_network import OnnxRegistrar

            network = pipeline(model).loaded().network
            if isinstance(network, OnnxRegistrar):
                self.stages = MethodTimer(network)
            else:
                net = network.model
                self.stages = ModuleTimer(
                    {"forward": net, "backbone": net.backbone, "transformer": net.transformer,
                     "optimal_transport": net.matcher.optimal_transport}
                )  # fmt: skip
        start = time.perf_counter()
        self.result = self._call()
        self.cold = time.perf_counter() - start
        self.times: list[float] = []
        self.splits: list[dict] = []

    def _call(self):
        p = self.pair
        return self._register(p.src, p.ref, model=self.model, method=self.method, icp=self.icp)

    def run(self) -> float:
        if self.stages is not None:
            self.stages.reset()
        start = time.perf_counter()
        self.result = self._call()
        self.times.append(time.perf_counter() - start)
        split = {"total": self.times[-1], "register": self.result.timings["register"]}
        if self.stages is not None:
            split.update(getattr(self.stages, "totals", self.stages.total))
        self.splits.append(split)
        return self.times[-1]

    def summary(self) -> dict:
        import torch

        from pcreg.io import read_points

        if not self.times:
            raise RuntimeError("no timed call: run() the case at least once")
        median = statistics.median(self.times)
        split = self.splits[min(range(len(self.times)), key=lambda i: abs(self.times[i] - median))]
        p = self.pair
        src = read_points(p.src)
        err = self.result.errors(np.asarray(p.gt), src)
        return {
            "median_s": median,
            "runs_s": self.times,
            "cold_s": self.cold,
            "stages": split,
            "points": [len(src), len(read_points(p.ref))],
            "rre_deg": err["rre_deg"],
            "rte_m": err["rte_m"],
            "rmse_m": err["rmse_m"],
            "transform": self.result.transform.tolist(),
            "peak_mib": _peak_mib(),
            "threads": torch.get_num_threads(),
        }


def _latency_worker(pair: dict, method: str, model: str, icp: bool, runs: int) -> dict:
    """One (pair, method) in this process: cold call, then ``runs`` timed calls."""
    case = _LatencyCase(pair, method, model, icp)
    for _ in range(runs):
        case.run()
    return case.summary()


_MARK = "@@pcreg-bench"  # prefixes the protocol lines on a serving worker's stdout
# every measuring process makes the allocator choice the `pcreg` command makes (pcreg/cli.py;
# pcreg/engine/heap.py: KITTI pairs ~10 % faster), so the figures are what its users see
_AS_THE_COMMAND_LINE = "from pcreg.engine.heap import retain_freed_memory; retain_freed_memory(); "


def _serve(pair: dict, method: str, model: str, icp: bool) -> None:
    """A latency worker process driven over stdin (:func:`_interleaved`): builds the case
    (the cold call), then one timed call per ``run`` line; ``done`` writes the summary."""
    case = _LatencyCase(pair, method, model, icp)
    _say("ready")
    for line in sys.stdin:
        if line.strip() != "run":
            break
        case.run()
        _say("ok")
    _say(json.dumps(case.summary()))


def _say(text: str) -> None:
    """A protocol line on stdout, the channel to the parent (:class:`_Served`)."""
    sys.stdout.write(f"{_MARK} {text}\n")
    sys.stdout.flush()


class _Served:
    """The parent's handle on one serving worker process: :func:`_serve` for ``(pair, method,
    model, icp)``, or the ``call`` given (a statement that serves the same protocol, e.g.
    :func:`pcreg.bench.busy._serve`) under ``env`` (added to this process's environment)."""

    def __init__(
        self,
        pair: RealPair,
        method: str,
        model: str | None,
        icp: bool,
        call: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        import tempfile

        self.label = f"{pair.name} / {method} / icp={icp}"
        call = call or (
            f"from pcreg.bench import pipeline as p; "
            f"p._serve({asdict(pair)!r}, {method!r}, {model!r}, {icp})"
        )
        code = f"import logging; logging.disable(logging.WARNING); {_AS_THE_COMMAND_LINE}{call}"
        # a file, not a pipe: a pipe nobody reads could fill up and block the worker
        self._err = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed in finish() / kill()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            bufsize=1,
            env={**os.environ, **(env or {})},
        )
        self._expect()  # ready: the cold call is done

    def _expect(self) -> str:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(_MARK + " "):
                return line[len(_MARK) + 1 :].strip()
        self._err.seek(0)
        raise RuntimeError(f"benchmark worker failed: {self.label}\n{self._err.read()[-2000:]}")

    def run(self, tag: str = "") -> None:
        """One timed call; ``tag`` (one word) is passed to a worker that sorts its calls."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"run {tag}".strip() + "\n")
        self.proc.stdin.flush()
        self._expect()

    def finish(self) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write("done\n")
        self.proc.stdin.flush()
        out = json.loads(self._expect())
        self.proc.wait()
        self._err.close()
        return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._err.close()


def _interleaved(pair: RealPair, cases: list[tuple[str, str, bool]], runs: int) -> list[dict]:
    """Time ``(method, model, icp)`` cases on one pair, one worker process each, alternating:
    round r calls every case once (starting with case r mod n), so the machine's drift over
    the minutes of a measurement falls on all of them alike and the ratios compare calls made
    seconds apart. The workers start one at a time (their cold calls do not overlap); a worker
    waiting for its next call sleeps on its stdin."""
    served: list[_Served] = []
    try:
        for method, model, icp in cases:
            served.append(_Served(pair, method, model, icp))
        for r in range(runs):
            for k in range(len(served)):
                served[(r + k) % len(served)].run()
        return [s.finish() for s in served]
    finally:
        for s in served:
            s.kill()


def _throughput_worker(pairs: list[dict], model: str, runs: int, workers: int = 2) -> dict:
    """Pairs per second of the network on four pairs: one after another (with torch's threads
    and with one thread, which shows how much of the CPU a single registration uses), as one
    batch in this process, and over a local Ray cluster of 1 and of ``workers`` CPUs
    (:class:`~pcreg.batch.runner.RayRunner`: one Ray task per pair, the cores per Ray CPU as
    its torch threads; the cluster started before timing, its start reported)."""
    import torch

    from pcreg.api import pipeline
    from pcreg.batch.runner import BatchOptions, RayRunner
    from pcreg.engine.heap import peak_rss_mib, retaining
    from pcreg.io import read_points

    register = pipeline(model, icp=False)  # the network's throughput
    clouds = [(read_points(p["src"]), read_points(p["ref"])) for p in pairs]
    four = [clouds[i % len(clouds)] for i in range(4)]
    threads = torch.get_num_threads()

    def rate(call) -> float:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        return 4 / statistics.median(times)

    register.batch(four[:1])  # warm-up
    out = {"batch1_pairs_per_s": rate(lambda: [register(*pair) for pair in four])}
    out["peak_mib_batch1"] = _peak_mib()
    torch.set_num_threads(1)
    try:
        out["batch1_one_thread_pairs_per_s"] = rate(lambda: [register(*pair) for pair in four])
    finally:
        torch.set_num_threads(threads)
    out["batch4_pairs_per_s"] = rate(lambda: register.batch(four))
    out["peak_mib_batch4"] = _peak_mib()
    options = BatchOptions(model=model, icp=False, retain_heap=retaining())
    for n in (1, workers):
        start = time.perf_counter()
        with RayRunner(options, workers=n) as runner:
            runner.map(four[:n])  # warms every worker up
            started = time.perf_counter() - start
            rate_n = rate(lambda runner=runner: runner.map(four))
            peaks = [m for m in map(peak_rss_mib, _ray_worker_pids()) if m is not None]
        if n == 1:
            out["ray1_pairs_per_s"] = rate_n
        else:
            out["batch4_workers_pairs_per_s"], out["pool_start_s"] = rate_n, started
            out["peak_mib_worker"] = max(peaks) if peaks else None
    from pcreg.engine.threads import usable_cores

    out.update(workers=workers, threads=threads, cores=usable_cores())
    return out


def _ray_worker_pids() -> list[int]:
    """Process ids of this machine's Ray worker processes (titled ``ray::...``)."""
    pids = []
    for entry in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if entry.read_bytes().startswith(b"ray::"):
                pids.append(int(entry.parent.name))
        except OSError:
            continue
    return pids


def _subprocess(call: str) -> dict:
    code = (
        "import json, sys, logging; logging.disable(logging.WARNING); "
        f"{_AS_THE_COMMAND_LINE}"
        "from pcreg.bench import pipeline as p; "
        f"sys.stdout.write('\\n' + json.dumps(p.{call}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark worker failed: {call}\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def benchmark_pipeline(
    shared_data: Path, models: dict[str, str], runs: int = 5, throughput: bool = True
) -> dict:
    """Latency of every method on every real pair, plus the batch throughput per setting.

    ``models`` maps a setting (``"indoor"``/``"outdoor"``) to a model name or checkpoint path;
    settings without one get only the FPFH + RANSAC rows.
    """
    from tqdm.auto import tqdm

    pairs = real_pairs(shared_data)
    jobs = []
    for pair in pairs:
        if pair.setting in models:
            jobs += [(pair, "geotransformer", models[pair.setting], icp) for icp in (False, True)]
        jobs += [(pair, FPFH, pair.setting, False), (pair, FPFH, pair.setting, True)]
    rows = []
    for pair in tqdm(pairs, desc="pipeline benchmark", unit="pair"):
        cases = [(m, model, icp) for p, m, model, icp in jobs if p is pair]
        for (method, model, icp), r in zip(cases, _interleaved(pair, cases, runs), strict=True):
            rows.append({"pair": pair.name, "setting": pair.setting, "method": method,
                         "model": model, "icp": icp, **r})  # fmt: skip
    refit = _score_against_refit(pairs, rows)
    through = {}
    if throughput:
        for setting, model in models.items():
            chosen = [asdict(p) for p in pairs if p.setting == setting]
            if chosen:
                through[setting] = _subprocess(f"_throughput_worker({chosen!r}, {model!r}, {runs})")
                through[setting]["model"] = model
    return {"rows": rows, "throughput": through, "runs": runs, "refit": refit}


def _score_against_refit(pairs: list[RealPair], rows: list[dict]) -> dict:
    """Refit every pair's published pose to its scans (:func:`pcreg.bench.refit.
    refit_ground_truth`) and score each row's transform against it (``*_refit`` keys, added
    to the rows in place). Returns, per pair name, the published pose's own errors against
    the refit."""
    from pcreg.bench.refit import refit_ground_truth
    from pcreg.geometry import pose_errors
    from pcreg.io import read_points

    out = {}
    for pair in pairs:
        src, ref = read_points(pair.src), read_points(pair.ref)
        refit = refit_ground_truth(src, ref, np.asarray(pair.gt), pair.setting)
        out[pair.name] = pose_errors(np.asarray(pair.gt), refit, src)
        for row in rows:
            if row["pair"] == pair.name:
                err = pose_errors(np.asarray(row["transform"]), refit, src)
                row.update({f"{k}_refit": v for k, v in err.items()})
    return out


# ----------------------------------------------------------------------------- report
def _label(row: dict) -> str:
    if row["method"] == FPFH:
        return "FPFH + RANSAC + ICP" if row["icp"] else "FPFH + RANSAC"
    return f"pcreg `{Path(row['model']).name}`" + (" + ICP" if row["icp"] else "")


def _success(row: dict) -> bool:
    if row["setting"] == "indoor":
        return row["rmse_m"] <= 0.2
    return row["rre_deg"] < 2.0 and row["rte_m"] < 0.3


def format_pipeline_tables(results: dict, command: str) -> str:
    """Markdown: latency + accuracy per pair and method, the network's stage split, and the
    batch throughput."""
    from pcreg.bench.report import machine_description

    rows = results["rows"]
    lines = [
        "## End-to-end registration latency (CPU)",
        "",
        f"Machine: {machine_description()}.",
        "Time = `pcreg.register(src_file, ref_file, ...)`: reading both files, input checks, "
        "voxelisation, registration and (where named) ICP. Each row in its own process: "
        f'"cold" = the first call (loads the model), then the median of {results["runs"]} '
        "calls; peak RSS of that process. The methods of a pair take turns, one call each per "
        "round, so that the machine's drift falls on all of them alike. Ratios: this row's "
        "median over FPFH + RANSAC's on the same pair in the same run. FPFH + RANSAC: Open3D, "
        "5 cm (indoor) / 0.3 m (outdoor) voxels, mutual filter off, 100k iterations, "
        "confidence 0.999; ICP point-to-plane at the same voxel. Success: indoor RMSE <= "
        "0.2 m, outdoor RRE < 2 deg and RTE < 0.3 m (no random motion here: the pairs as "
        "published).",
        "",
        f"Command: `{command}`",
        "",
        "| pair | points (src, ref) | method | median s | cold s | / FPFH+RANSAC | RRE deg | "
        "RTE m | RMSE m | success | peak RSS MiB |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    ref_time = {r["pair"]: r["median_s"] for r in rows if r["method"] == FPFH and not r["icp"]}
    for r in rows:
        ratio = r["median_s"] / ref_time[r["pair"]] if r["pair"] in ref_time else float("nan")
        lines.append(
            f"| {r['pair']} | {r['points'][0]:,}, {r['points'][1]:,} | {_label(r)} | "
            f"{r['median_s']:.2f} | {r['cold_s']:.2f} | {ratio:.2f}x | {r['rre_deg']:.2f} | "
            f"{r['rte_m']:.3f} | {r['rmse_m']:.3f} | {'yes' if _success(r) else 'no'} | "
            f"{r['peak_mib']:.0f} |"
        )
    if results.get("refit"):
        lines += _refit_table(results["refit"], rows)
    nets = [r for r in rows if r["method"] == "geotransformer" and not r["icp"]]
    if nets:
        lines += [
            "",
            "Where the network's median call goes (seconds; preprocess = voxel grids and neighbor "
            "pyramid, and for a Manhattan-search model its frames and hypothesis ranking; "
            "backbone to matching summed over the hypotheses run):",
            "",
            "| pair | model | read + checks | preprocess | backbone | transformer | "
            "optimal transport | matching + LGR | total |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in nets:
            s = r["stages"]
            rest = s["forward"] - s["backbone"] - s["transformer"] - s["optimal_transport"]
            lines.append(
                f"| {r['pair']} | `{Path(r['model']).name}` | {s['total'] - s['register']:.3f} | "
                f"{s['register'] - s['forward']:.3f} | {s['backbone']:.3f} | "
                f"{s['transformer']:.3f} | {s['optimal_transport']:.3f} | {rest:.3f} | "
                f"{s['total']:.3f} |"
            )
    if results["throughput"]:
        lines += _throughput_table(results)
    return "\n".join(lines)


def _refit_table(refit: dict, rows: list[dict]) -> list[str]:
    """Markdown lines: every row's errors against its pair's refit ground truth, under the
    published pose's own."""
    lines = [
        "",
        "The same transforms scored against the ground truth refit to the scans "
        "(`pcreg.bench.refit`: point-to-plane ICP from the published pose, 5 -> 2 cm voxels "
        "indoors, 0.3 -> 0.1 m outdoors, run to convergence; the KITTI registration benchmarks "
        "refine their ground truth this way). The first row of a pair is how far the published "
        "pose itself lies from the refit.",
        "",
        "| pair | pose | RRE deg | RTE m | RMSE m |",
        "|---|---|---:|---:|---:|",
    ]
    for pair, own in refit.items():
        lines.append(
            f"| {pair} | published ground truth | {own['rre_deg']:.2f} | {own['rte_m']:.3f} | "
            f"{own['rmse_m']:.3f} |"
        )
        for r in rows:
            if r["pair"] == pair and "rre_deg_refit" in r:
                lines.append(
                    f"| {pair} | {_label(r)} | {r['rre_deg_refit']:.2f} | "
                    f"{r['rte_m_refit']:.3f} | {r['rmse_m_refit']:.3f} |"
                )
    return lines


def _throughput_table(results: dict) -> list[str]:
    """Markdown lines: batch throughput per setting, with the perfect-scaling ceiling."""
    from pcreg.batch.runner import threads_per_cpu

    lines = [
        "",
        "Batch throughput of the network (four pairs of the setting, clouds in memory; "
        f"median of {results['runs']}). Batch 1: the pairs one after another, with torch's "
        "threads and with one thread (their ratio is how much a single registration gains "
        "from the other cores). Batch 4: `Registration.batch` in this process (one padded "
        "forward pass; the indoor search runs pair by pair), and on a local Ray cluster of 1 "
        "and of 2 CPUs, one task per pair with the cores per Ray CPU as its torch threads "
        "(`pcreg.batch.runner.RayRunner`, "
        "what `pcreg batch` runs; the cluster's start, excluded, is its own column). Ceiling: "
        "what the workers would give "
        "with perfect scaling, min(workers, cores) x the one-thread rate, over batch 1; "
        "scaling: the workers' rate as a share of that perfect rate.",
        "",
        "| setting | model | batch 1 pairs/s (torch threads; 1 thread) | "
        "batch 4, one process pairs/s | Ray, 1 worker pairs/s | Ray, 2 workers pairs/s | "
        "batch 4 / batch 1 (one process; 2 workers) | ceiling; scaling | Ray start s | "
        "peak RSS MiB (batch 1; batch 4; each worker) |",
        "|---|---|---|---:|---:|---:|---|---|---:|---|",
    ]
    for setting, t in results["throughput"].items():
        b1, one = t["batch1_pairs_per_s"], t["batch1_one_thread_pairs_per_s"]
        perfect = min(t["workers"], t.get("cores") or t["workers"]) * one
        per_task = threads_per_cpu(t.get("cores") or t["workers"], t["workers"])
        lines.append(
            f"| {setting} | `{Path(t['model']).name}` | {b1:.2f} ({t['threads']} threads); "
            f"{one:.2f} | {t['batch4_pairs_per_s']:.2f} | {t['ray1_pairs_per_s']:.2f} | "
            f"{t['batch4_workers_pairs_per_s']:.2f} ({t['workers']} x {per_task} thread) | "
            f"{t['batch4_pairs_per_s'] / b1:.2f}x; "
            f"**{t['batch4_workers_pairs_per_s'] / b1:.2f}x** | {perfect / b1:.2f}x; "
            f"{t['batch4_workers_pairs_per_s'] / perfect:.0%} | {t['pool_start_s']:.1f} | "
            f"{t['peak_mib_batch1']:.0f}; {t['peak_mib_batch4']:.0f}; "
            f"{t['peak_mib_worker'] or float('nan'):.0f} |"
        )
    return lines
