"""Odometry over a pair that does not register: the chain breaks there, the registered segments
keep their poses, and the command line writes its outputs, says so in one line and exits 3.

No network, no Ray cluster: the per-pair registration is replaced by known motions (the serial
path's ``pcreg.api.pipeline``; the Ray path's runner and ``ray.wait`` / ``ray.get``), with a
chosen pair coming back unregistered."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from pcreg.cli import main
from pcreg.data.kitti import read_poses
from pcreg.odometry import CONVENTION, run_odometry, sidecar_path

REASON = "confidence 0.12 below 0.35"


def _motion(k: int) -> np.ndarray:
    """A known relative motion ``T_{k-1 <- k}``: a yaw of 0.1 k rad and a step forward."""
    c, s = np.cos(0.1 * k), np.sin(0.1 * k)
    t = np.eye(4)
    t[:2, :2] = [[c, -s], [s, c]]
    t[:3, 3] = [1.0 + k, 0.2, 0.0]
    return t


@pytest.fixture
def four_scans(tmp_path, rng):
    """Four random clouds ``0.npy .. 3.npy`` (only read, never really registered)."""
    scans = []
    for k in range(4):
        path = tmp_path / f"{k}.npy"
        np.save(path, rng.uniform(0, 30, (3000, 3)).astype(np.float32))
        scans.append(path)
    return scans


@pytest.fixture
def fake_serial(monkeypatch):
    """The serial path's registrations: pair k (scan k onto k-1) gives ``_motion(k)``, except
    the sources named in the returned set, which come back unregistered."""
    broken: set[str] = set()

    def pipeline(model, **kwargs):
        def register(src, ref, names):
            k = int(names[0].rsplit("/", 1)[-1].split(".")[0])
            ok = names[0].rsplit("/", 1)[-1] not in broken
            return SimpleNamespace(
                registered=ok, transform=_motion(k), reason=None if ok else REASON,
                model="outdoor", time_s=0.01 * k,
            )  # fmt: skip

        return register

    monkeypatch.setattr("pcreg.api.pipeline", pipeline)
    return broken


def _check_broken_at_pair_1(res) -> None:
    """Pair 1 (scan 2 onto scan 1) did not register: segments {0, 1} and {2, 3}."""
    assert res.registered.tolist() == [True, False, True] and not res.complete
    assert res.reasons == ["", REASON, ""]
    assert res.segments.tolist() == [0, 0, 1, 1]
    assert np.allclose(res.poses[0], np.eye(4)) and np.allclose(res.poses[1], _motion(1))
    assert np.allclose(res.poses[2], np.eye(4))  # a new segment starts at scan 2
    assert np.allclose(res.poses[3], _motion(3))  # scan 3 in scan 2's frame
    assert np.isnan(res.relative[1]).all() and np.allclose(res.relative[2], _motion(3))


def test_serial_odometry_breaks_the_chain_at_an_unregistered_pair(four_scans, fake_serial):
    fake_serial.add("2.npy")
    res = run_odometry(four_scans, workers=1, progress=False)
    _check_broken_at_pair_1(res)
    assert [b["pair"] for b in res.breaks(four_scans)] == [1]


def test_ray_odometry_breaks_the_chain_at_an_unregistered_pair(four_scans, monkeypatch):
    """The Ray path (``_on_ray``) reads the runner's rows the same way; no cluster starts."""
    import ray

    rows: dict[object, dict] = {}

    class Runner:
        def __init__(self, options, address=None, workers=None):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def submit(self, pairs):
            pending = {}
            for pair in reversed(pairs):  # out of order, as Ray may finish them
                k, ref = int(pair.id), object()
                ok = k != 2
                rows[ref] = {
                    "id": pair.id, "status": "ok", "registered": ok,
                    "reason": None if ok else REASON, "transform": _motion(k).tolist(),
                    "time_s": 0.01 * k, "model": "outdoor",
                }  # fmt: skip
                pending[ref] = pair
            return pending

    monkeypatch.setattr("pcreg.batch.runner.RayRunner", Runner)
    monkeypatch.setattr(ray, "wait", lambda refs, num_returns=1: (refs[:1], refs[1:]))
    monkeypatch.setattr(ray, "get", lambda ref: rows[ref])
    res = run_odometry(four_scans, workers=2, progress=False)
    _check_broken_at_pair_1(res)


def test_cli_writes_the_segments_flags_the_pairs_and_exits_3(
    four_scans, fake_serial, tmp_path, capsys
):
    out = tmp_path / "poses.txt"
    argv = ["odometry", *map(str, four_scans), "--workers", "1", "--out", str(out), "--json"]
    assert main(argv) == 0  # every pair registered: one segment, every pair flagged so
    record = json.loads(capsys.readouterr().out)
    assert record["registered"] is True and record["segments"] == [0, 0, 0, 0]
    assert [p["registered"] for p in record["pairs"]] == [True, True, True]
    assert json.loads(sidecar_path(out).read_text())["breaks"] == []

    fake_serial.add("2.npy")
    assert main([*argv, "--force"]) == 3
    captured = capsys.readouterr()
    # stderr: one line naming the pair, the reason and the break
    err = captured.err
    assert err.count("\n") == 1, err
    assert err.startswith(f"pcreg: {four_scans[2]} -> {four_scans[1]}: not registered: {REASON}")
    assert "breaks at 1 of 3 pairs" in err and str(sidecar_path(out)) in err
    # --json: per-pair flags and reasons; no motion across the break
    record = json.loads(captured.out)
    assert record["registered"] is False
    assert [(p["registered"], p["reason"]) for p in record["pairs"]] == [
        (True, None), (False, REASON), (True, None)
    ]  # fmt: skip
    assert record["relative"][1] is None and np.allclose(record["relative"][2], _motion(3))
    assert record["segments"] == [0, 0, 1, 1]
    # the poses file: still one valid row per scan (evo reads it), segment by segment
    poses = read_poses(out)
    assert poses.shape == (4, 4, 4) and np.isfinite(poses).all()
    assert np.allclose(poses[1], _motion(1), atol=1e-8) and np.allclose(poses[2], np.eye(4))
    assert np.allclose(poses[3], _motion(3), atol=1e-8)
    # the sidecar marks the break: which pair, why, and the segment of every scan
    side = json.loads(sidecar_path(out).read_text())
    assert side["convention"] == CONVENTION and side["segments"] == [0, 0, 1, 1]
    assert side["breaks"] == [
        {"pair": 1, "src": str(four_scans[2]), "ref": str(four_scans[1]), "reason": REASON,
         "segment": 1}
    ]  # fmt: skip
