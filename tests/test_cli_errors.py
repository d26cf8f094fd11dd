"""Exit codes and one-line messages of the command line: closed or full stdout, OS errors on
a user's paths, third-party warnings, and exit 3 with nothing written for an unregistered
pair."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pcreg.cli import main
from pcreg.registration.result import RegistrationResult

REPO = Path(__file__).resolve().parents[1]


def _pcreg(*args: str, shell_suffix: str = "") -> subprocess.CompletedProcess:
    cmd = " ".join([sys.executable, "-m", "pcreg", *[f"'{a}'" for a in args]]) + shell_suffix
    return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=REPO,
                          timeout=300)  # fmt: skip


@pytest.fixture
def clouds(tmp_path, rng):
    src, ref = tmp_path / "src.npy", tmp_path / "ref.npy"
    np.save(src, rng.uniform(0, 3, (2000, 3)))
    np.save(ref, rng.uniform(0, 3, (2000, 3)))
    return src, ref


def _one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("pcreg: error: "), stderr
    assert "\x1b[" not in lines[0]
    return lines[0]


@pytest.mark.parametrize("redirect", [" >&-", " >/dev/full"])
def test_closed_or_full_stdout_is_exit_2(clouds, redirect, tmp_path):
    """Exit 2, one line, and no --out: the summary is written before the outputs are moved
    into place (a full stdout once left --out behind a run that failed)."""
    src, _ = clouds
    # view without --render opens a window; the cheapest command printing to stdout on good
    # input is register on a refused pair... so use a pair that registers fast: fpfh at 0.3 m
    out = tmp_path / "T.txt"
    proc = _pcreg("register", str(src), str(src), "--method", "fpfh-ransac", "--voxel-size",
                  "0.3", "--json", "--out", str(out), shell_suffix=redirect)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "stdout" in _one_error_line(proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref.npy", "src.npy"]  # no T.txt


def test_a_map_to_a_full_stdout_writes_no_map(clouds, tmp_path):
    """``pcreg map`` prints its poses before it writes the map: a full stdout is exit 2 with
    one line and no --out folder (it once left the whole map behind a run that failed)."""
    src, _ = clouds
    out = tmp_path / "map"
    proc = _pcreg("map", str(src), str(src), "--method", "fpfh-ransac", "--voxel-size", "0.3",
                  "--workers", "1", "--json", "--out", str(out),
                  shell_suffix=" >/dev/full")  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "stdout" in _one_error_line(proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref.npy", "src.npy"]  # no map/


def test_file_name_too_long_is_exit_2(tmp_path, clouds):
    _, ref = clouds
    long = tmp_path / ("x" * 300 + ".npy")
    assert main(["register", str(long), str(ref)]) == 2


def test_unregistered_pair_exits_3_and_writes_nothing(tmp_path, clouds, monkeypatch, capsys):
    src, ref = clouds

    def unregistered(*args, **kwargs):
        empty = np.zeros((0, 3))
        return RegistrationResult(np.eye(4), empty, empty, np.zeros(0), "fpfh-ransac",
                                  "indoor", "indoor", False, 0.05)  # fmt: skip

    monkeypatch.setattr("pcreg.api.register_points", unregistered)
    out, png = tmp_path / "T.txt", tmp_path / "a.png"
    code = main(["register", str(src), str(ref), "--json", "--out", str(out), "--render", str(png)])
    assert code == 3
    captured = capsys.readouterr()
    assert '"registered": false' in captured.out
    assert len(captured.out.splitlines()) == 1  # the record only: no error object after it
    assert captured.err.strip().splitlines() == [
        f"pcreg: {src} -> {ref}: not registered: no correspondences: the estimate (the identity) "
        "rests on nothing"
    ]
    assert not out.exists() and not png.exists()


def test_with_json_bad_input_is_a_json_object_on_stdout_too(tmp_path, clouds, capsys):
    """A script reading ``--json`` from stdout gets one object there on exit 2 as well, with
    the stderr line's words; without ``--json`` stdout stays empty."""
    src, _ = clouds
    missing = tmp_path / "missing.ply"
    assert main(["register", str(src), str(missing), "--json"]) == 2
    captured = capsys.readouterr()
    line = _one_error_line(captured.err)
    assert json.loads(captured.out) == {"error": line.removeprefix("pcreg: error: "),
                                        "exit_code": 2}  # fmt: skip
    assert str(missing) in line and "not found" in line
    assert main(["register", str(src), str(missing)]) == 2
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("bad", [["--voxel-size", "abc"], ["--voxel", "0.05"]])
def test_with_json_an_argument_error_is_a_json_object_on_stdout_too(clouds, capsys, bad):
    """The parser's refusals (a bad value, an unknown or abbreviated option) as well: exit 2,
    the one line on stderr, and its words as one object on stdout."""
    src, ref = clouds
    with pytest.raises(SystemExit) as exit_:
        main(["register", str(src), str(ref), "--json", *bad])
    captured = capsys.readouterr()
    assert exit_.value.code == 2
    (line,) = captured.err.splitlines()
    assert line.startswith("pcreg register: error: ") and bad[0] in line
    assert json.loads(captured.out) == {"error": line.removeprefix("pcreg register: error: "),
                                        "exit_code": 2}  # fmt: skip
    with pytest.raises(SystemExit):
        main(["register", str(src), str(ref), *bad])
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("bad", [[], ["--threshold", "x", "a.png"]])
def test_a_nested_parsers_argument_error_is_a_json_object_with_json(capsys, bad):
    """`pcreg detr predict` parses its own options: its refusals gave the stderr line only,
    with `--json` too (a script reading stdout got nothing)."""
    with pytest.raises(SystemExit) as exit_:
        main(["detr", "predict", "--json", *bad])
    captured = capsys.readouterr()
    assert exit_.value.code == 2
    (line,) = captured.err.splitlines()
    assert line.startswith("pcreg detr predict: error: ")
    assert json.loads(captured.out) == {
        "error": line.removeprefix("pcreg detr predict: error: "),
        "exit_code": 2,
    }
    with pytest.raises(SystemExit):
        main(["detr", "predict", *bad])
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("value", ["0", "-0.1", "nan", "inf"])
def test_a_voxel_size_that_is_no_length_is_refused_by_its_option_name(clouds, capsys, value):
    """`--voxel-size 0` said "voxel_size: must be a positive number" (the API's name for it);
    the parser now refuses it naming the option, before anything is read."""
    src, ref = clouds
    with pytest.raises(SystemExit) as exit_:
        main(["register", str(src), str(ref), "--voxel-size", value])
    assert exit_.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("pcreg register: error: argument --voxel-size: must be a positive "
                           f"number of metres, got {value}")  # fmt: skip


def test_no_correspondences_names_the_identity_only_where_the_estimate_is_it():
    """An object-in-scene search returned a pose 14,000 km off whose fit kept no point; its
    reason said "the estimate (the identity)"."""
    empty = np.zeros((0, 3))
    far = np.eye(4)
    far[:3, 3] = [1.4e7, 0.0, 0.0]
    args = (empty, empty, np.zeros(0), "fpfh-ransac", "indoor", "indoor", False, 0.05)
    assert "(the identity)" in RegistrationResult(np.eye(4), *args).reason
    reason = RegistrationResult(far, *args).reason
    assert reason.startswith("no correspondences") and "identity" not in reason, reason


def test_reasons():
    pts = np.ones((5, 3))
    result = RegistrationResult(np.eye(4), pts[:2], pts[:2], np.ones(2), "m", "m", "indoor",
                                False, 0.05, confidence=0.5)  # fmt: skip
    assert not result.registered and "only 2 correspondences" in result.reason
    result = RegistrationResult(np.eye(4), pts, pts, np.ones(5), "m", "m", "indoor", False, 0.05)
    assert not result.registered and "confidence 0" in result.reason
    result.confidence = 0.2
    assert result.registered and result.reason == ""
    assert result.to_dict()["registered"] is True


def test_bad_device_and_voxel_are_one_line(clouds):
    src, ref = clouds
    for extra in (["--device", "foo"], ["--method", "fpfh-ransac", "--voxel-size", "1e-9"]):
        proc = _pcreg("register", str(src), str(ref), *extra)
        assert proc.returncode == 2, proc.stderr
        _one_error_line(proc.stderr)


def test_millimetre_room_refused_before_loading_with_the_numbers(tmp_path, room_pair):
    """The demo's room pair in millimetres: the network alone takes its input for metres and
    refuses the 5 km "room" before loading, with the numbers; the default reads the unit
    and registers it (random points in millimetres, refused after the whole search, took 15
    s of the suite here)."""
    src, ref, truth = room_pair
    np.save(tmp_path / "mm_src.npy", src.astype(np.float64) * 1000.0)
    np.save(tmp_path / "mm_ref.npy", ref.astype(np.float64) * 1000.0)
    pair = (str(tmp_path / "mm_src.npy"), str(tmp_path / "mm_ref.npy"))
    proc = _pcreg("register", *pair, "--method", "geotransformer")  # metres, as it says
    assert proc.returncode == 2
    line = _one_error_line(proc.stderr)
    assert "GiB" in line and "superpoints" in line and "--max-memory" in line
    proc = _pcreg("register", *pair, "--json")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert (record["units"], record["registered"]) == ("millimetres", True)
    transform = np.array(record["transform"])  # in the input's units: millimetres
    np.testing.assert_allclose(transform[:3, :3], truth[:3, :3], atol=0.01)
    np.testing.assert_allclose(transform[:3, 3], truth[:3, 3] * 1000.0, atol=50.0)


def test_view_warns_about_mixed_units(tmp_path, rng, caplog):
    room = rng.uniform(0, 3, (3000, 3))
    np.save(tmp_path / "m.npy", room)
    np.save(tmp_path / "mm.npy", room * 1000)
    png = tmp_path / "v.png"
    assert (
        main(["view", str(tmp_path / "mm.npy"), str(tmp_path / "m.npy"), "--render", str(png)]) == 0
    )
    assert any("scales differ" in r.getMessage() for r in caplog.records)
    assert png.exists()


@pytest.mark.parametrize(
    ("flag", "name", "kind"),
    [("--render", "pic.jpg", "PNG"), ("--report", "rep.txt", "HTML"), ("--render", "", "PNG")],
)
def test_a_picture_or_page_named_for_another_format_is_refused(tmp_path, clouds, capsys,
                                                               flag, name, kind):  # fmt: skip
    """``--render pic.jpg`` wrote PNG bytes into pic.jpg, ``--report rep.txt`` HTML into a
    .txt: refused before any work, in one line naming the file, exit 2, nothing written;
    ``.PNG`` and ``.htm`` are the same formats."""
    src, ref = clouds
    path = tmp_path / (name or "picture")
    assert main(["register", str(src), str(ref), flag, str(path)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(path) in line and f"is written as {kind}" in line
    assert not path.exists()


def test_the_formats_own_suffixes_in_any_case_pass_the_check(tmp_path):
    from pcreg.commands._common import check_kinds

    check_kinds(pictures=[tmp_path / "a.PNG", None], pages=[tmp_path / "b.htm", None])
    check_kinds(pictures=[tmp_path / "a.png"], pages=[tmp_path / "b.HTML"])


@pytest.mark.parametrize("command", ["view", "odometry", "map"])
def test_max_memory_caps_the_reading_of_every_command(tmp_path, rng, capsys, command):
    """``--max-memory`` reaches the readers of ``view``, ``odometry`` and ``map`` as it does
    ``register``'s (they read under the fixed 4 GiB before, so "raise --max-memory" in the
    refusal did nothing); a cap the files fit under lets them through."""
    from pcreg.cli import main

    scans = []
    for name in ("a", "b", "c"):
        np.save(tmp_path / f"{name}.npy", rng.uniform(0, 3, (2000, 3)))  # 47 KiB each
        scans.append(str(tmp_path / f"{name}.npy"))
    tail = {"view": ["--render", str(tmp_path / "v.png")], "odometry": [],
            "map": ["--out", str(tmp_path / "map"), "--workers", "1"]}[command]  # fmt: skip
    argv = [command, *scans[: 2 if command != "map" else 3], *tail]
    assert main([*argv, "--max-memory", "20K"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "a.npy: too large to read under the memory cap" in line and "KiB" in line, line
    if command == "view":  # the same files under a cap they fit in
        assert main([*argv, "--max-memory", "1M"]) == 0
        assert (tmp_path / "v.png").stat().st_size > 1000


@pytest.mark.ray
def test_a_batch_pair_over_the_memory_cap_fails_with_the_reason(tmp_path, rng, capsys):
    """``pcreg batch --max-memory``: the pair's reading is refused under the cap, the pair is
    recorded as failed with the reader's reason, and the run goes on; a run with a failed pair
    exits 4 with one line that counts the failures and gives the first (it exited 0 before)."""
    from pcreg.cli import main

    for name in ("a", "b"):
        np.save(tmp_path / f"{name}.npy", rng.uniform(0, 3, (2000, 3)))
    (tmp_path / "pairs.csv").write_text("id,src,ref\np,a.npy,b.npy\n")
    out = tmp_path / "out"
    rc = main(["batch", str(tmp_path / "pairs.csv"), "--out", str(out), "--workers", "1",
               "--max-memory", "20K"])  # fmt: skip
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 4 and len(lines) == 1, lines
    assert lines[0].startswith(f"pcreg: {tmp_path / 'pairs.csv'}: 1 of 1 pairs failed, the "
                               "first p: "), lines  # fmt: skip
    assert "a.npy: too large to read under the memory cap" in lines[0], lines
    assert json.loads((out / "summary.json").read_text())["failed"] == 1
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["failed"], rows
    assert "too large to read under the memory cap" in json.dumps(rows)


@pytest.mark.parametrize("case", ["the manifest", "a scan", "a link elsewhere"])
def test_batch_never_writes_its_results_into_an_input_or_through_a_link(tmp_path, rng, capsys,
                                                                         case):  # fmt: skip
    """``pcreg batch``'s ``results.jsonl`` (appended to) and ``summary.json`` are refused
    before any work where they are the manifest or a scan, by name or through a link, or a
    link to any other file, with ``--force`` too (a hostile run: the manifest named
    ``results.jsonl`` in ``--out`` was appended to, and replaced with ``--force``)."""
    from pcreg.cli import main

    for name in ("a", "b"):
        np.save(tmp_path / f"{name}.npy", rng.uniform(0, 3, (2000, 3)))
    manifest = tmp_path / "pairs.jsonl"
    manifest.write_text('{"id": "p", "src": "a.npy", "ref": "b.npy"}\n')
    out = tmp_path / "out"
    out.mkdir()
    victim = {"the manifest": manifest, "a scan": tmp_path / "a.npy"}.get(case)
    if victim is None:
        victim = tmp_path / "notes.jsonl"
        victim.write_text("mine\n")
    (out / "results.jsonl").symlink_to(victim)
    before = victim.read_bytes()
    for force in ([], ["--force"]):
        assert main(["batch", str(manifest), "--out", str(out), "--workers", "1", *force]) == 2
        line = _one_error_line(capsys.readouterr().err)
        said = "is a symbolic link" if case == "a link elsewhere" else "is an input of this"
        assert said in line, line
    assert victim.read_bytes() == before and not (out / "summary.json").exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--runs", "0"], "argument --runs: must be at least 1, got 0"),
        (["--draws", "-1"], "argument --draws: must be at least 1, got -1"),
        (["--limit", "-3"], "argument --limit: must be at least 1, got -3"),
        (["--quick", "--indoor-model", "nope.pt"], "nope.pt: model checkpoint not found"),
        (["--quick", "--radius", "nan"], "--radius: must be a positive number of metres"),
        (["--quick", "--output", "{tmp}/no/b.md"], "does not exist"),
        (
            ["--quick", "--output", "{tmp}/m.pt", "--indoor-model", "{tmp}/m.pt"],
            "is an input of this command",
        ),
    ],
)
def test_benchmark_arguments_are_refused_before_any_work(tmp_path, capsys, args, said):
    """``pcreg benchmark`` refuses what it cannot use at once (a hostile run: ``--runs 0`` was
    an internal error, a missing ``--indoor-model`` ran the whole benchmark without it, and a
    missing ``--output`` folder was said after 12 s of work)."""
    from pcreg.cli import main

    (tmp_path / "m.pt").write_bytes(b"weights")
    argv = ["benchmark", *[a.replace("{tmp}", str(tmp_path)) for a in args]]
    try:
        code = main(argv)
    except SystemExit as parsed:  # the parser's own refusal
        code = parsed.code
    assert code == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pt"]  # nothing written
