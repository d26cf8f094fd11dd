"""Busy-machine benchmark (pcreg/bench/busy.py): the competing load starts and stops, the
in-process worker sorts its calls by condition, a whole process is timed and scored, the
table."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from pcreg.bench import busy
from pcreg.bench.pipeline import _Served
from pcreg.bench.real_pairs import real_pairs
from pcreg.geometry import pose_errors


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_busy_machine_runs_two_spinners_and_stops_them_on_errors() -> None:
    from pcreg.engine.threads import busy_elsewhere

    with pytest.raises(KeyError), busy.busy_machine() as pids:
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        assert busy_elsewhere() >= 2  # both are running, not sleeping
        raise KeyError
    assert not any(_alive(p) for p in pids)


def test_kiss_worker_sorts_its_calls_by_condition(shared_data) -> None:
    pytest.importorskip("kiss_matcher")
    pair = real_pairs(shared_data)[0]  # 3DMatch 0<-6
    call = f"from pcreg.bench import busy as b; b._serve({asdict(pair)!r}, 'kiss-matcher')"
    served = _Served(pair, "kiss", None, False, call=call)
    try:
        served.run("idle")
        served.run("busy")
        served.run("idle")
        out = served.finish()
    finally:
        served.kill()
    assert [len(out["times"]["idle"]), len(out["times"]["busy"])] == [2, 1]
    assert all(0 < t < 30 for t in out["times"]["idle"] + out["times"]["busy"])
    err = pose_errors(np.asarray(out["transform"]), np.asarray(pair.gt))
    assert err["rre_deg"] < 5 and err["rte_m"] < 0.2  # KISS-Matcher registers the demo pair


def test_whole_process_register_is_timed_and_read_back(shared_data) -> None:
    pair = real_pairs(shared_data)[0]
    command, env = busy._whole_commands(pair)["pcreg register (whole process)"]
    wall, peak, transform, registered = busy._run_whole(command, env)
    assert registered and 0.1 < wall < 120
    assert 100 < peak < 4096  # MiB: the process's own high-water mark
    err = pose_errors(transform, np.asarray(pair.gt))
    assert err["rre_deg"] < 5 and err["rte_m"] < 0.2
    with pytest.raises(RuntimeError, match="exit 2"):  # a failing command is not a time
        busy._run_whole([*command[:-3], "/nonexistent.ply", pair.ref, "--json"], env)


def test_table_has_ratios_and_marks_in_process_memory_unknown() -> None:
    rows = [
        {"pair": "A", "variant": "pcreg (in-process)", "idle_s": 0.2, "busy_s": 0.3,
         "ratio": 1.5, "registered": True, "peak_mib": None, "rre_deg_refit": 0.1234,
         "rte_m_refit": 0.0123},
        {"pair": "A", "variant": "pcreg register (whole process)", "idle_s": 2.0, "busy_s": 5.0,
         "ratio": 2.5, "registered": False, "peak_mib": 812.4, "rre_deg_refit": 9.0,
         "rte_m_refit": 1.0},
    ]  # fmt: skip
    text = busy.format_busy_table({"rows": rows, "runs": 3}, "pcreg benchmark --busy")
    lines = text.splitlines()
    assert "| A | pcreg (in-process) | 0.200 | 0.300 | 1.50x | yes | 0.12 | 0.012 | - |" in lines
    assert (
        "| A | pcreg register (whole process) | 2.000 | 5.000 | 2.50x | no | 9.00 | 1.000 | 812 |"
        in lines
    )
    assert "Command: `pcreg benchmark --busy`" in lines


def test_whole_process_memory_is_the_childs_own() -> None:
    """Linux keeps the peak RSS across exec: a child forked straight from this process (torch
    loaded, a 400 MB array held) would report this process's peak, not its own."""
    import resource

    ballast = np.ones(50_000_000)  # 400 MB resident here
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 > 400
    code = (
        "import json; print(json.dumps({'transform': [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], "
        "[0, 0, 0, 1]], 'registered': False}))"
    )
    wall, peak, transform, registered = busy._run_whole([sys.executable, "-c", code], {})
    assert peak < 100 and 0 < wall < 30  # a bare interpreter: ~10 MiB
    assert not registered and np.array_equal(transform, np.eye(4))
    del ballast


def test_kiss_script_runs_as_a_whole_process(shared_data) -> None:
    """The KISS-Matcher script row: a standalone script (numpy reader, KISS-Matcher) whose one
    JSON line is read back and scored."""
    pytest.importorskip("kiss_matcher")
    pair = real_pairs(shared_data)[0]
    command, env = busy._whole_commands(pair)["KISS-Matcher script (whole process)"]
    wall, peak, transform, registered = busy._run_whole(command, env)
    assert registered and 0 < wall < 60 and 10 < peak < 1024
    err = pose_errors(transform, np.asarray(pair.gt))
    assert err["rre_deg"] < 10 and err["rte_m"] < 0.3  # 5.1 deg / 18 cm against the refit
