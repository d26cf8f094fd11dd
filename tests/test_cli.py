"""The command line: exit codes and one-line messages, the demo end to end."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from pcreg.cli import main
from pcreg.demo import run_demo


def test_demo_on_generated_pair_registers_and_writes_outputs(tmp_path):
    summary = run_demo(tmp_path / "out", shared_data=None)
    record = json.loads((tmp_path / "out/result.json").read_text())
    assert record["registered"], record
    assert record["rre_deg"] < 2.0 and record["rte_m"] < 0.05
    assert record["inlier_ratio"] > 0.5 and record["num_correspondences"] > 100
    est = np.loadtxt(tmp_path / "out/transform.txt")
    np.testing.assert_allclose(est, np.array(record["transform"]), atol=1e-12)
    png = (tmp_path / "out/alignment.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000  # a real rendering, not blank
    assert "registered" in summary


def test_demo_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "result.json").write_text("keep me")
    code = main(["demo", "--out", str(out), "--shared-data", str(tmp_path / "none")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"pcreg: error: {out / 'result.json'}: already exists")
    assert (out / "result.json").read_text() == "keep me"
    assert not (out / "transform.txt").exists()


@pytest.mark.data
def test_demo_on_real_3dmatch_pair(tmp_path, shared_data):
    run_demo(tmp_path, shared_data=shared_data)
    record = json.loads((tmp_path / "result.json").read_text())
    assert "redkitchen" in record["pair"]
    assert record["registered"] and record["rmse_m"] < 0.2, record


def test_console_script_runs_as_module():
    proc = subprocess.run(
        [sys.executable, "-m", "pcreg", "--help"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and "benchmark" in proc.stdout and "demo" in proc.stdout


def test_benchmark_section_replacement(tmp_path):
    from pcreg.bench.report import replace_section

    md = tmp_path / "B.md"
    md.write_text("# Benchmarks\n\nintro\n")
    replace_section(md, "neighbors", "table v1")
    replace_section(md, "other", "x")
    replace_section(md, "neighbors", "table v2")
    text = md.read_text()
    assert "table v2" in text and "table v1" not in text and "intro" in text and "x" in text
    assert text.count("<!-- BEGIN neighbors -->") == 1
