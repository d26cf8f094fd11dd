"""The command line: exit codes and one-line messages, the demo end to end, every subcommand
in its own module of pcreg.commands, the benchmark's choice of sections."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import pcreg
from pcreg.cli import main
from pcreg.data.synthetic.pairs import overlap_ratio
from pcreg.demo import run_demo
from pcreg.geometry import relative_rotation_error_deg
from pcreg.io import read_points


def test_demo_generated_pair_with_fpfh_ransac_writes_everything(tmp_path):
    summary = run_demo(tmp_path / "out", method="fpfh-ransac", icp=True)
    record = json.loads((tmp_path / "out/result.json").read_text())
    assert "generated room" in record["pair"] and record["method"] == "fpfh-ransac"
    est = np.loadtxt(tmp_path / "out/transform.txt")
    np.testing.assert_allclose(est, np.array(record["transform"]), atol=1e-12)
    # the reported errors are those of the written estimate against the written truth
    gt = np.loadtxt(tmp_path / "out/gt.txt")
    rre = float(relative_rotation_error_deg(torch.from_numpy(est), torch.from_numpy(gt)))
    assert abs(rre - record["rre_deg"]) < 1e-6
    assert abs(np.linalg.norm(est[:3, 3] - gt[:3, 3]) - record["rte_m"]) < 1e-9
    src = read_points(tmp_path / "out/src.ply").astype(np.float64)
    rmse = np.sqrt(np.mean(np.sum((src @ (est - gt)[:3, :3].T + (est - gt)[:3, 3]) ** 2, 1)))
    assert abs(rmse - record["rmse_m"]) < 1e-5
    assert record["right"] == (rmse <= 0.2)  # the truth's check, beside pcreg's own verdict
    pcreg_says = pcreg.register(src, read_points(tmp_path / "out/ref.ply"), model="indoor",
                                method="fpfh-ransac")  # fmt: skip
    assert record["registered"] == pcreg_says.registered
    for name in ("alignment.png", "correspondences.png"):
        png = (tmp_path / "out" / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000  # a rendering, not blank
    page = (tmp_path / "out/report.html").read_text()  # the interactive page, same result
    assert "reference: ref.ply" in page and f"{record['rre_deg']:.3f} deg" in page
    np.testing.assert_allclose(gt, np.array(record["gt_transform"]), atol=1e-9)
    # the written pair and truth are consistent: most of src moved by gt lands on ref
    ref = read_points(tmp_path / "out/ref.ply")
    overlap = overlap_ratio(src.astype(np.float32), ref, gt, 0.0375)
    assert 0.3 < overlap < 0.7, overlap
    assert "registered" in summary


def test_the_demos_registered_is_pcregs_verdict_and_right_is_the_truths(tmp_path, monkeypatch):
    """``result.json``'s ``registered`` is pcreg's own verdict, as ``pcreg register --json``
    gives it, never the check against the truth: a right estimate that pcreg refuses says
    ``registered: false`` and ``right: true`` (the summary says both)."""
    import pcreg.api

    real = pcreg.api.register_points

    def refusing(*args, **kwargs):
        result = real(*args, **kwargs)
        result.rejected = "refused for this test"
        return result

    monkeypatch.setattr(pcreg.api, "register_points", refusing)
    summary = run_demo(tmp_path / "out")  # the generated room, the network: right
    record = json.loads((tmp_path / "out/result.json").read_text())
    assert record["registered"] is False and record["reason"] == "refused for this test"
    assert record["right"] is True and record["rmse_m"] <= 0.2
    # pcreg register's own default ran (its readings of the units; the network alone had none)
    assert record["readings"][0]["units"] == "metres" and record["method_used"] == "geotransformer"
    assert "NOT registered; against the truth" in summary and "-> right" in summary


def test_demo_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "result.json").write_text("keep me")
    code = main(["demo", "--out", str(out), "--method", "fpfh-ransac"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"pcreg: error: {out / 'result.json'}: already exists")
    assert (out / "result.json").read_text() == "keep me"
    assert not (out / "transform.txt").exists()


@pytest.mark.data
def test_demo_on_real_3dmatch_pair(tmp_path, shared_data):
    run_demo(tmp_path, source="real", shared_data=shared_data, method="fpfh-ransac", icp=True)
    record = json.loads((tmp_path / "result.json").read_text())
    assert "redkitchen" in record["pair"]
    assert record["right"] and record["rmse_m"] < 0.2, record


def test_make_demo_runs_twice_in_a_row(tmp_path, monkeypatch, capsys):
    """The Makefile's `demo` recipe, run twice in one directory: the second run replaces the
    first one's outputs (it stopped with "demo_out/transform.txt: already exists")."""
    import shlex
    from pathlib import Path

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text().splitlines()
    start = makefile.index("demo: setup")
    recipe = next(line for line in makefile[start + 1 :] if line.startswith("\t"))
    words = shlex.split(recipe)
    assert words[:4] == ["$(VENV)/bin/pcreg", "demo", "--out", "demo_out"]
    monkeypatch.chdir(tmp_path)
    argv = [*words[1:], "--method", "fpfh-ransac"]  # the recipe's arguments, the fast method
    assert main(argv) == 0
    first = (tmp_path / "demo_out" / "result.json").read_text()
    assert main(argv) == 0, capsys.readouterr().err
    second = json.loads((tmp_path / "demo_out" / "result.json").read_text())
    assert second["pair"] == json.loads(first)["pair"]
    # pcreg's own verdict, as `pcreg register --json` gives it, and the truth's check beside it
    assert second["registered"] is True and second["right"] is True, second
    assert second["reason"] == ""


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


SUBCOMMANDS = {
    "benchmark": "pcreg.commands.benchmark",
    "register": "pcreg.commands.register",
    "batch": "pcreg.commands.batch",
    "manifest": "pcreg.commands.batch",
    "odometry": "pcreg.commands.odometry",
    "map": "pcreg.commands.map",
    "view": "pcreg.commands.view",
    "demo": "pcreg.commands.demo",
    "vit": "pcreg.commands.train",
    "detr": "pcreg.commands.train",
    "train": "pcreg.commands.train",
    "evaluate": "pcreg.commands.evaluate",
    "evaluate-log": "pcreg.commands.evaluate",
    "serve": "pcreg.commands.serve",
}


def _subparsers():
    import argparse

    from pcreg.cli import build_parser

    (action,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices


def test_every_subcommand_is_a_thin_module_of_pcreg_commands():
    """cli.py only builds the parser and maps errors: each handler lives in its command module,
    listed in the same order as ever."""
    import pcreg.cli

    choices = _subparsers()
    assert list(choices) == list(SUBCOMMANDS)
    assert {n: p.get_default("func").__module__ for n, p in choices.items()} == SUBCOMMANDS
    left = [n for n in vars(pcreg.cli) if n.startswith(("_cmd_", "_benchmark_", "_hydra"))]
    assert left == []


def test_default_shared_data_is_beside_the_checkout():
    from pathlib import Path

    from pcreg.commands._paths import DEFAULT_SHARED_DATA

    repo = Path(__file__).resolve().parents[1]
    expected = Path(os.environ.get("PCREG_SHARED_DATA", repo.parent / "shared" / "data"))
    assert expected == DEFAULT_SHARED_DATA
    for name in ("benchmark", "demo"):
        assert _subparsers()[name].get_default("shared_data") == expected


@pytest.fixture
def sections(monkeypatch, tmp_path):
    """The benchmark sections replaced by recorders: which ran, with which models."""
    import pcreg.commands.benchmark as bench
    from pcreg.errors import InputError

    ran = []

    def fake(name, fail=False):
        def section(args):
            ran.append((name, args.indoor_model, args.outdoor_model))
            if fail:
                raise InputError(tmp_path, "no data here")
            return 0

        section.__name__ = f"_benchmark_{name}"
        return section

    for name in ("neighbors", "subsampling", "pipeline", "busy", "registration"):
        monkeypatch.setattr(bench, f"_benchmark_{name}", fake(name))
    monkeypatch.setattr(bench, "_benchmark_model", fake("model", fail=True))
    monkeypatch.setattr(bench, "_model_exists", lambda m: m != "outdoor")
    return ran


def test_benchmark_runs_the_sections_its_flags_name(sections):
    assert main(["benchmark", "--pipeline", "--outdoor-model", "none"]) == 0
    assert sections == [("pipeline", "indoor", "none"), ("busy", "indoor", "none")]
    sections.clear()
    assert main(["benchmark", "--busy"]) == 0
    assert sections == [("busy", "indoor", "outdoor")]
    sections.clear()
    assert main(["benchmark", "--quick"]) == 0
    assert [s[0] for s in sections] == ["neighbors", "subsampling"]


def test_full_benchmark_skips_absent_models_and_sections_without_data(sections, caplog):
    import logging

    with caplog.at_level(logging.WARNING, logger="pcreg"):
        assert main(["benchmark"]) == 0
    # the model section raised InputError (no demo pair): skipped, the others still ran; the
    # absent outdoor model is left out of the pipeline and registration sections
    assert sections == [
        ("neighbors", "indoor", "outdoor"),
        ("subsampling", "indoor", "outdoor"),
        ("model", "indoor", "outdoor"),
        ("pipeline", "indoor", "none"),
        ("busy", "indoor", "none"),
        ("registration", "indoor", "none"),
    ]
    assert "skipping _benchmark_model: " in caplog.text and "no data here" in caplog.text
    assert "_benchmark_pipeline: skipping models that do not exist: outdoor" in caplog.text


def test_the_command_line_opts_into_keeping_freed_memory(monkeypatch, capsys):
    """The process-wide malloc setting (pcreg/engine/heap.py) is the entry point's choice, made
    before any command runs; building a model does not make it (tests/engine/test_heap.py)."""
    from pcreg.cli import main
    from pcreg.engine import heap

    monkeypatch.delenv(heap.ENV_VAR, raising=False)
    monkeypatch.setattr(heap, "_active", False)
    assert main(["evaluate-log", "--gt-dir", "/nonexistent", "--est-dir", "/nonexistent"]) == 2
    assert heap._active == (heap._glibc() is not None)


@pytest.mark.parametrize(
    "argv",
    [["register"], ["batch"], ["manifest"], ["odometry"], ["view"], ["demo"], ["evaluate"],
     ["evaluate-log"], ["train"], ["benchmark"], ["serve"], ["vit", "train"],
     ["vit", "evaluate"], ["detr", "train"], ["detr", "evaluate"], ["detr", "predict"]],
)  # fmt: skip
def test_help_works_on_every_subcommand(capsys, argv):
    """``--help`` prints a usage and exits 0 everywhere (``detr train --help`` used to reach
    Hydra's override parser: LexerNoViableAltException, exit 2)."""
    from pcreg.cli import main

    try:
        code = main([*argv, "--help"])
    except SystemExit as stop:  # argparse's own help exits
        code = stop.code
    out = capsys.readouterr().out
    assert code == 0 and "usage:" in out, out


def test_odometry_help_says_its_default_model_and_method(capsys):
    """``pcreg odometry`` runs the outdoor network alone unless told otherwise; its help said
    neither (its ``--method`` had no help at all)."""
    from pcreg.cli import main

    with pytest.raises(SystemExit):
        main(["odometry", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "checkpoint PATH (default: outdoor)" in out, out
    assert "(default: geotransformer) geotransformer: the network alone" in out, out


@pytest.mark.parametrize("command", ["batch", "map"])
def test_cpu_only_commands_do_not_offer_cuda(capsys, command):
    """``batch`` and ``map`` refuse ``--device cuda``; their help offered it all the same, and
    ``batch --force`` said it replaced output files where it discards the run's results."""
    from pcreg.cli import main

    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--device DEVICE cpu only:" in out and "cuda" not in out, out
    if command == "batch":
        assert "--force start over: replace DIR's results.jsonl" in out, out


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["register", "a.npy", "b.npy", "--out", ""], "argument --out: an empty path"),
        (["register", "", "b.npy"], "argument src: an empty path"),
        (["register", "a.npy", "b.npy", "--report", " "], "argument --report: an empty path (' ')"),
        (["map", "a.npy", "b.npy", "--out", ""], "argument --out: an empty path"),
        (["view", "a.npy", "", "--render", "v.png"], "argument ref: an empty path"),
        (["register", "a.npy", "b.npy", "--out", "newdir/"],
         "argument --out: 'newdir/' names a folder; give a file path in it"),
        (["register", "a.npy", "b.npy", "--render", "pics/"],
         "argument --render: 'pics/' names a folder; give a file path in it"),
        (["odometry", "a.npy", "b.npy", "--out", "poses/"],
         "argument --out: 'poses/' names a folder; give a file path in it"),
    ],
)  # fmt: skip
def test_an_empty_path_or_a_folder_for_a_file_is_named(tmp_path, monkeypatch, capsys, argv, said):
    """``Path("")`` is ``.``: an empty ``--out`` was reported as "'.': is a directory"; a file
    output ending in ``/`` lost its slash ("newdir: unknown transform output format"). Both
    are argument errors now (exit 2, nothing read or created)."""
    from pcreg.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"error: {said} (see `pcreg " in line and line.endswith(" --help`)"), line
    assert list(tmp_path.iterdir()) == []


def test_verbose_is_taken_before_or_after_the_subcommand():
    """`pcreg register SRC REF -v` as a bug report writes it (it said "unrecognized arguments:
    -v", exit 2); absent after the subcommand, the top level's -v stands."""
    from pcreg.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["register", "a.ply", "b.ply", "-v"]).verbose is True
    assert parser.parse_args(["-v", "register", "a.ply", "b.ply"]).verbose is True
    assert parser.parse_args(["register", "a.ply", "b.ply"]).verbose is False
    for name, sub in _subparsers().items():  # those that pass their words on keep them
        own = set(sub._option_string_actions)
        assert "--verbose" in own or own <= {"-h", "--help"}, name
    assert "--verbose" in _subparsers()["map"]._option_string_actions


@pytest.mark.parametrize(
    "argv, named",
    [
        (["register", "a.ply"], "ref"),
        (["register", "a.ply", "b.ply", "--voxel-size", "abc"], "--voxel-size"),
        (["regster", "a.ply", "b.ply"], "regster"),
        (["map"], "pcreg map"),
        (["detr", "predict", "--threshold", "x", "a.png"], "--threshold"),
        (["register", "a.ply", "b.ply", "--voxl", "0.05"], "pcreg register --help"),
        (["vit", "train", "--foo"], "pcreg vit --help"),
    ],
)
def test_an_argument_error_is_one_line(capsys, argv, named):
    """The contract for bad input: one line naming the argument and the problem, exit 2
    (argparse printed its whole usage block before the line: 10 lines for ``register``)."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "usage:" not in err and named in err and ": error: " in err and "--help" in err, err


@pytest.mark.parametrize("argv", [["register", "a.ply", "b.ply", "--voxel", "0.05"],
                                  ["batch", "pairs.csv", "--out", "o", "--work", "2"]])  # fmt: skip
def test_options_are_never_abbreviated(capsys, argv):
    """``--voxel`` is not ``--voxel-size``: a script keeps its meaning when an option with the
    same start is added later. The refusal is the one-line argument error, exit 2."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert f"unrecognized arguments: {' '.join(argv[-2:])}" in err, err


@pytest.mark.parametrize("command", ["vit", "detr"])
def test_a_missing_action_names_the_action_alone(capsys, command):
    """Hydra overrides are optional: ``pcreg vit`` said "required: action, overrides"."""
    with pytest.raises(SystemExit):
        main([command])
    err = capsys.readouterr().err
    assert "required: action (" in err and "overrides" not in err, err
