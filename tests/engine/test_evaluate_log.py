"""`pcreg evaluate-log`: the published 3DMatch protocol on hand-made and real ground truth."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pcreg.cli import main
from pcreg.data.threedmatch import LogEntry, read_gt_log, write_log
from pcreg.engine.evaluate_log import score_log_dirs


def _rot_z(deg):
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    t = np.eye(4)
    t[:2, :2] = [[c, -s], [s, c]]
    return t


def _write_scene(root, scene, entries, info_diag):
    (root / scene).mkdir(parents=True)
    write_log(root / scene / "gt.log", entries)
    lines = []
    for e in entries:
        lines.append(f"{e.i}\t{e.j}\t{e.num_fragments}")
        lines += ["\t".join(str(v) for v in row) for row in np.diag(info_diag)]
    (root / scene / "gt.info").write_text("\n".join(lines) + "\n")


@pytest.fixture
def bench(tmp_path, rng):
    gt, est = tmp_path / "gt", tmp_path / "est"
    base = [np.eye(4) for _ in range(6)]
    for b in base:
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        b[:3, :3] = q * np.sign(np.linalg.det(q))  # a proper rotation
        b[:3, 3] = rng.normal(size=3)
    pairs_a = [(0, 1), (0, 2), (1, 3), (0, 5), (2, 4)]
    pairs_b = [(0, 2), (1, 4)]
    a = [LogEntry(i, j, 6, base[k]) for k, (i, j) in enumerate(pairs_a)]
    b = [LogEntry(i, j, 5, base[k]) for k, (i, j) in enumerate(pairs_b)]
    # information: translation weight 100, rotation weight 400 -> rmse^2 = |t|^2 + 4|q_xyz|^2
    _write_scene(gt, "scene-a", a, [100, 100, 100, 400, 400, 400])
    _write_scene(gt, "scene-b", b, [100, 100, 100, 400, 400, 400])
    shift = np.eye(4)
    # scene a: (0,1) consecutive (ignored even though wrong), (0,2) +10 cm -> ok, (1,3) +30 cm
    # -> fail, (0,5) rotated 5 deg -> rmse = 2 sin(2.5 deg) = 0.0872 -> ok, (2,4) missing -> fail
    est_a = []
    for e in a:
        t = e.matrix.copy()
        if (e.i, e.j) == (0, 1):
            t = t @ _rot_z(90)
        elif (e.i, e.j) == (0, 2):
            shift[:3, 3] = [0.1, 0, 0]
            t = t @ shift.copy()
        elif (e.i, e.j) == (1, 3):
            shift[:3, 3] = [0, 0.3, 0]
            t = t @ shift.copy()
        elif (e.i, e.j) == (0, 5):
            t = t @ _rot_z(5)
        else:
            continue
        est_a.append(LogEntry(e.i, e.j, e.num_fragments, t))
    (est / "scene-a").mkdir(parents=True)
    write_log(est / "scene-a" / "est.log", est_a)
    # scene b (flat layout): (0,2) exact, (1,4) rotated 15 deg -> rmse 2 sin(7.5) = 0.261 -> fail
    write_log(
        est / "scene-b.log",
        [LogEntry(0, 2, 5, b[0].matrix), LogEntry(1, 4, 5, b[1].matrix @ _rot_z(15))],
    )
    return gt, est


def test_known_perturbations_give_hand_computed_scores(bench):
    gt, est = bench
    s = score_log_dirs(gt, est)
    a, b = s["scenes"]
    assert (a["pairs"], a["registered"], a["missing"]) == (4, 2, 1)  # (0,1) excluded, (0,2) counted
    assert (b["pairs"], b["registered"]) == (2, 1)
    assert s["overall"]["registration_recall"] == pytest.approx((2 / 4 + 1 / 2) / 2)
    assert s["overall"]["pair_recall"] == pytest.approx(3 / 6)
    rmse = {(p["i"], p["j"]): p["rmse"] for p in s["pairs"] if p["scene"] == "scene-a"}
    assert rmse[(0, 2)] == pytest.approx(0.1, abs=1e-9)
    assert rmse[(1, 3)] == pytest.approx(0.3, abs=1e-9)
    assert rmse[(0, 5)] == pytest.approx(2 * math.sin(math.radians(2.5)), abs=1e-9)
    assert rmse[(2, 4)] is None
    # errors over registered pairs: scene a has 0 deg / 10 cm and 5 deg / t of R-rotation
    assert a["rre_deg"] == pytest.approx(2.5, abs=1e-6)
    assert b["rre_deg"] == pytest.approx(0.0, abs=1e-6) and b["rte_m"] == pytest.approx(0, abs=1e-9)


def test_cli_json_and_errors(bench, capsys, tmp_path):
    gt, est = bench
    assert main(["evaluate-log", "--gt-dir", str(gt), "--est-dir", str(est), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["overall"]["registered"] == 3
    assert main(["evaluate-log", "--gt-dir", str(tmp_path / "nope"), "--est-dir", str(est)]) == 2
    assert "ground-truth directory not found" in capsys.readouterr().err


@pytest.mark.data
@pytest.mark.parametrize("bench_name,pairs", [("3DMatch", 1279), ("3DLoMatch", 1726)])
def test_ground_truth_as_estimate_scores_100_percent(shared_data, tmp_path, bench_name, pairs):
    gt = shared_data / "geotransformer_repo" / "3DMatch" / "metadata" / "benchmarks" / bench_name
    for scene in gt.iterdir():
        (tmp_path / scene.name).mkdir()
        write_log(tmp_path / scene.name / "est.log", read_gt_log(scene / "gt.log"))
    s = score_log_dirs(gt, tmp_path)
    assert s["overall"]["pairs"] == pairs
    assert s["overall"]["registration_recall"] == 1.0
    assert len(s["scenes"]) == 8
