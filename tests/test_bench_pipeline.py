"""Pipeline benchmark: the real pairs it finds, one in-process latency measurement, the table."""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from typing import ClassVar

import numpy as np
import pytest

from pcreg.bench.pipeline import _latency_worker, _score_against_refit, format_pipeline_tables
from pcreg.bench.real_pairs import real_pairs


def test_finds_the_four_real_pairs_with_their_settings(shared_data):
    pairs = real_pairs(shared_data)
    assert [(p.name, p.setting) for p in pairs] == [
        ("3DMatch 0<-6", "indoor"),
        ("3DMatch 0<-5", "indoor"),
        ("KITTI 95<-94", "outdoor"),
        ("KITTI 199<-198", "outdoor"),
    ]


def test_latency_worker_times_and_scores_fpfh_on_a_real_pair(shared_data):
    pair = real_pairs(shared_data)[1]
    r = _latency_worker(asdict(pair), "fpfh-ransac", "indoor", False, 2)
    assert len(r["runs_s"]) == 2 and r["median_s"] > 0 and r["cold_s"] > 0
    assert r["points"] == [19084, 18977]
    assert r["rmse_m"] <= 0.2 and r["rre_deg"] < 5  # FPFH + RANSAC registers this pair
    assert r["peak_mib"] > 100
    # scored again against the refit ground truth: the transform travelled with the summary
    row = {"pair": pair.name, **r}
    own = _score_against_refit([pair], [row])[pair.name]
    assert own["rte_m"] > 0.02  # 0<-5's published pose is centimetres from the refit
    assert 0 < row["rmse_m_refit"] < 0.2 and row["rre_deg_refit"] < 5
    assert row["rmse_m_refit"] != pytest.approx(r["rmse_m"])  # a different truth


def _row(pair, setting, method, icp, median, rre, rte, rmse, model="indoor"):
    return {"pair": pair, "setting": setting, "method": method, "model": model, "icp": icp,
            "median_s": median, "cold_s": median + 1, "points": [10, 20], "rre_deg": rre,
            "rte_m": rte, "rmse_m": rmse, "peak_mib": 300.0,
            "stages": {"total": median, "register": median - 0.1, "forward": median - 0.3,
                       "backbone": 0.2, "transformer": 0.1, "optimal_transport": 0.05}}  # fmt: skip


def test_table_scores_against_the_refit_ground_truth_under_the_published_pose():
    rows = [_row("A", "indoor", "geotransformer", False, 1.5, 1.0, 0.05, 0.25, "/x/indoor.pt")]
    rows[0].update(rre_deg_refit=0.5, rte_m_refit=0.012, rmse_m_refit=0.02)
    rows.append(_row("A", "indoor", "fpfh-ransac", False, 0.5, 2.0, 0.04, 0.05))
    rows[1].update(rre_deg_refit=2.5, rte_m_refit=0.071, rmse_m_refit=0.086)
    refit = {"A": {"rre_deg": 1.28, "rte_m": 0.107, "rmse_m": 0.07}}
    text = format_pipeline_tables({"runs": 3, "rows": rows, "throughput": {}, "refit": refit}, "c")
    lines = text.splitlines()
    at = lines.index("| A | published ground truth | 1.28 | 0.107 | 0.070 |")
    assert lines[at + 1] == "| A | pcreg `indoor.pt` | 0.50 | 0.012 | 0.020 |"
    assert lines[at + 2] == "| A | FPFH + RANSAC | 2.50 | 0.071 | 0.086 |"
    # without refit results (older runs) the table is left out
    assert "published ground truth" not in format_pipeline_tables(
        {"runs": 3, "rows": rows, "throughput": {}}, "c"
    )


def test_table_ratios_success_and_stage_split():
    results = {
        "runs": 5,
        "rows": [
            _row("A", "indoor", "geotransformer", False, 1.5, 1.0, 0.05, 0.25, "/x/indoor.pt"),
            _row("A", "indoor", "fpfh-ransac", False, 0.5, 2.0, 0.04, 0.05),
            _row("K", "outdoor", "fpfh-ransac", True, 2.0, 1.9, 0.29, 0.3),
            _row("A", "indoor", "geotransformer", True, 1.6, 0.5, 0.02, 0.02, "/x/indoor.pt"),
        ],
        "throughput": {
            "indoor": {
                "model": "/x/indoor.pt",
                "batch1_pairs_per_s": 1.0,
                "batch1_one_thread_pairs_per_s": 0.9,
                "batch4_pairs_per_s": 0.95,
                "batch4_workers_pairs_per_s": 1.6,
                "ray1_pairs_per_s": 0.85,
                "pool_start_s": 4.24,
                "peak_mib_batch1": 900,
                "peak_mib_batch4": 1800,
                "peak_mib_worker": 700,
                "workers": 2,
                "threads": 2,
                "cores": 2,
            }
        },
    }
    text = format_pipeline_tables(results, "pcreg benchmark --pipeline")
    lines = text.splitlines()
    net = next(x for x in lines if x.startswith("| A |") and "indoor.pt" in x and "10, 20" in x)
    assert "| 1.50 | 2.50 | 3.00x |" in net and net.endswith("| 0.250 | no | 300 |")
    fpfh = next(x for x in lines if x.startswith("| A |") and "FPFH + RANSAC |" in x)
    assert "| 1.00x |" in fpfh and "| yes |" in fpfh
    refined = next(x for x in lines if "pcreg `indoor.pt` + ICP |" in x)
    assert "| 1.60 | 2.60 | 3.20x |" in refined
    assert sum(x.startswith("| A | `indoor.pt` |") for x in lines) == 1  # one stage split
    kitti = next(x for x in lines if x.startswith("| K |"))
    assert "FPFH + RANSAC + ICP" in kitti and "| nan" in kitti and "| yes |" in kitti
    split = next(x for x in lines if x.startswith("| A | `indoor.pt` |"))
    # read 0.1, preprocess 0.2, backbone 0.2, transformer 0.1, OT 0.05, rest 1.2-0.35
    assert split == "| A | `indoor.pt` | 0.100 | 0.200 | 0.200 | 0.100 | 0.050 | 0.850 | 1.500 |"
    assert (
        "| indoor | `indoor.pt` | 1.00 (2 threads); 0.90 | 0.95 | 0.85 | 1.60 (2 x 1 thread) | "
        "0.95x; **1.60x** | 1.80x; 89% | 4.2 | 900; 1800; 700 |" in text
    )  # ceiling 2 workers x 0.90 / 1.00; scaling 1.60 / 1.80
    with pytest.raises(KeyError):
        format_pipeline_tables({"runs": 1, "rows": [{"pair": "x"}], "throughput": {}}, "c")


class _InProcessRunner:
    """:class:`~pcreg.batch.runner.RayRunner`'s interface, each pair registered in this
    process: the throughput worker's bookkeeping without starting two Ray clusters (the
    runner itself is tested on a real cluster in tests/batch/test_ray.py)."""

    started: ClassVar[list[int]] = []

    def __init__(self, options, workers: int) -> None:
        self.register = options.pipeline()
        self.started.append(workers)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def map(self, pairs):
        return [self.register(src, ref) for src, ref in pairs]


def test_throughput_worker_counts_every_rate_of_its_runs(
    tiny_checkpoint, room_pair, tmp_path, monkeypatch
):
    """The cheap twin of the slow test below: every rate measured and positive, the thread
    count restored, a runner of 1 and of 2 workers started, with Ray replaced."""
    from pcreg.batch import runner

    monkeypatch.setattr(runner, "RayRunner", _InProcessRunner)
    monkeypatch.setattr(_InProcessRunner, "started", [])
    _throughput_of(room_pair, 8, tiny_checkpoint, tmp_path)
    assert _InProcessRunner.started == [1, 2]


def _throughput_of(room_pair, every: int, checkpoint, tmp_path) -> dict:
    """The throughput worker's output on every ``every``-th point of the room pair, checked
    for what both throughput tests expect: every rate, the threads restored, the peaks."""
    import torch

    from pcreg.bench.pipeline import _throughput_worker
    from pcreg.io import write_points

    src, ref, _ = room_pair  # fewer points: the rates' bookkeeping is under test
    write_points(tmp_path / "src.ply", src[::every])
    write_points(tmp_path / "ref.ply", ref[::every])
    pair = {"src": str(tmp_path / "src.ply"), "ref": str(tmp_path / "ref.ply")}
    threads = torch.get_num_threads()
    out = _throughput_worker([pair], str(checkpoint), 1)
    for key in ("batch1", "batch1_one_thread", "batch4", "ray1", "batch4_workers"):
        assert out[f"{key}_pairs_per_s"] > 0, key
    assert torch.get_num_threads() == threads  # the one-thread run restored it
    assert out["cores"] == os.cpu_count() and out["workers"] == 2
    assert out["pool_start_s"] > 0
    assert out["peak_mib_batch4"] >= out["peak_mib_batch1"] > 50
    return out


@pytest.mark.slow
def test_throughput_worker_reports_every_rate(tiny_checkpoint, room_pair, tmp_path):
    out = _throughput_of(room_pair, 4, tiny_checkpoint, tmp_path)
    if sys.platform == "linux":  # a worker holds torch and a model, less than this process
        assert 50 < out["peak_mib_worker"] < out["peak_mib_batch4"] + 500


def test_latency_worker_splits_the_network_call_into_stages(tiny_checkpoint, room_pair, tmp_path):
    """The stage timers hook the model instance ``register`` actually runs: every stage gets
    time, and the stages fit inside the call."""
    from pcreg.bench.real_pairs import RealPair
    from pcreg.io import write_points

    src, ref, gt = room_pair
    write_points(tmp_path / "src.ply", src)
    write_points(tmp_path / "ref.ply", ref)
    pair = RealPair("room", "indoor", str(tmp_path / "src.ply"), str(tmp_path / "ref.ply"),
                    gt.tolist())  # fmt: skip
    st = _latency_worker(asdict(pair), "geotransformer", str(tiny_checkpoint), False, 1)["stages"]
    for stage in ("forward", "backbone", "transformer", "optimal_transport"):
        assert st[stage] > 0, (stage, st)
    assert st["backbone"] + st["transformer"] + st["optimal_transport"] <= st["forward"]
    assert st["forward"] <= st["register"] <= st["total"]


def test_interleaved_cases_take_turns_in_their_own_processes(tiny_checkpoint, room_pair, tmp_path):
    """Two methods on one pair, alternating: each gets every timed call and its own summary
    (its own process: the network's model is not loaded in the FPFH worker)."""
    from pcreg.bench.pipeline import _interleaved
    from pcreg.bench.real_pairs import RealPair
    from pcreg.io import write_points

    src, ref, gt = room_pair  # an eighth of the points: the turns are under test, not speed
    write_points(tmp_path / "src.ply", src[::8])
    write_points(tmp_path / "ref.ply", ref[::8])
    pair = RealPair("room", "indoor", str(tmp_path / "src.ply"), str(tmp_path / "ref.ply"),
                    gt.tolist())  # fmt: skip
    cases = [("geotransformer", str(tiny_checkpoint), False), ("fpfh-ransac", "indoor", False)]
    net, fpfh = _interleaved(pair, cases, 3)
    for r in (net, fpfh):
        assert len(r["runs_s"]) == 3 and all(t > 0 for t in r["runs_s"])
        assert r["median_s"] == sorted(r["runs_s"])[1] and r["cold_s"] > 0
    assert net["stages"]["backbone"] > 0 and "backbone" not in fpfh["stages"]
    # each scored against the ground truth (RANSAC is random: no claim on its success here)
    assert all(np.isfinite(r["rmse_m"]) and r["rmse_m"] >= 0 for r in (net, fpfh))
    assert net["peak_mib"] != fpfh["peak_mib"]


def test_a_failing_served_worker_names_its_case(tmp_path):
    from pcreg.bench.pipeline import _interleaved
    from pcreg.bench.real_pairs import RealPair

    pair = RealPair("gone", "indoor", str(tmp_path / "no.ply"), str(tmp_path / "no.ply"),
                    [[1.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])  # fmt: skip
    with pytest.raises(RuntimeError, match="gone / fpfh-ransac") as err:
        _interleaved(pair, [("fpfh-ransac", "indoor", False)], 1)
    assert "no.ply" in str(err.value)
