"""Clean writes (pcreg._fs and the commands' output checks): one path per output, only regular
files written or replaced, and no temporary file left behind, not even after a SIGKILL once
the next write to the same target has run."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pcreg._fs import _host_tag, atomic_output, check_writable
from pcreg.cli import main
from pcreg.commands._common import check_outputs
from pcreg.errors import InputError, OutputExistsError, UnwritableOutputError

REPO = Path(__file__).resolve().parents[1]


def _temps(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".tmp" in p.name)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _temp_name(target: str, pid: int, tag: str | None = None) -> str:
    return f".{target}.pcreg-{pid}-{tag or _host_tag()}-abcd1234.tmp{Path(target).suffix}"


# -- one path per output --------------------------------------------------------------------


def test_check_outputs_refuses_the_same_path_twice(tmp_path, monkeypatch):
    (tmp_path / "out").mkdir()
    same = [tmp_path / "out" / "T.txt", tmp_path / "out" / ".." / "out" / "T.txt"]
    with pytest.raises(InputError, match="named for two outputs") as err:
        check_outputs(same, force=True)
    assert "T.txt" in str(err.value) and "\n" not in str(err.value)
    assert list((tmp_path / "out").iterdir()) == []
    # relative against absolute: the same file too
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="named for two outputs"):
        check_outputs([Path("out/T.txt"), None, tmp_path / "out/T.txt"], force=False)
    check_outputs([tmp_path / "out/T.txt", None, tmp_path / "out/R.png"], force=False)


def test_check_outputs_refuses_two_names_of_one_existing_file(tmp_path):
    (tmp_path / "T.txt").write_text("keep")
    os.link(tmp_path / "T.txt", tmp_path / "hard.txt")
    with pytest.raises(InputError, match="named for two outputs"):
        check_outputs([tmp_path / "T.txt", tmp_path / "hard.txt"], force=True)
    assert (tmp_path / "T.txt").read_text() == "keep"


def test_register_with_one_path_for_out_and_render_writes_nothing(tmp_path, capsys):
    target = tmp_path / "T.txt"
    argv = ["register", str(tmp_path / "a.ply"), str(tmp_path / "b.ply"),
            "--out", str(target), "--render", str(target)]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"pcreg: error: {target}: named for two outputs"), err
    assert list(tmp_path.iterdir()) == []


# -- only regular files ---------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_refused_even_with_force(tmp_path):
    fifo = tmp_path / "T.txt"
    os.mkfifo(fifo)
    for overwrite in (False, True):
        with pytest.raises(UnwritableOutputError, match="is a FIFO") as err:
            check_writable(fifo, overwrite=overwrite)
        assert "\n" not in str(err.value)
        with (
            pytest.raises(UnwritableOutputError, match="not a regular file"),
            atomic_output(fifo, overwrite=overwrite) as tmp,
        ):
            tmp.write_text("x")
    with pytest.raises(UnwritableOutputError, match="FIFO"):
        check_outputs([fifo], force=True)
    assert fifo.is_fifo() and _temps(tmp_path) == []


def test_symlink_refused_even_with_force(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("keep")
    link = tmp_path / "T.txt"
    link.symlink_to(real)
    dangling = tmp_path / "D.txt"
    dangling.symlink_to(tmp_path / "nowhere.txt")
    linked_dir = tmp_path / "L"
    linked_dir.symlink_to(tmp_path)
    for path in (link, dangling, linked_dir):
        for overwrite in (False, True):
            with pytest.raises(UnwritableOutputError, match="symbolic link") as err:
                check_writable(path, overwrite=overwrite)
            assert "remove it or name its target" in str(err.value)
    with (
        pytest.raises(UnwritableOutputError, match="symbolic link"),
        atomic_output(dangling, overwrite=True) as tmp,
    ):
        tmp.write_text("x")
    assert link.is_symlink() and dangling.is_symlink() and real.read_text() == "keep"
    assert not (tmp_path / "nowhere.txt").exists() and _temps(tmp_path) == []


def test_existing_file_message_names_the_flag_and_the_keyword(tmp_path):
    (tmp_path / "T.txt").write_text("keep")
    with pytest.raises(OutputExistsError, match=r"use --force, or overwrite=True in Python"):
        check_writable(tmp_path / "T.txt")
    with pytest.raises(UnwritableOutputError, match="is a directory"):
        check_writable(tmp_path, overwrite=True)
    with pytest.raises(UnwritableOutputError, match=r"'.*T.txt' is not a directory"):
        check_writable(tmp_path / "T.txt" / "U.txt")
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    with pytest.raises(UnwritableOutputError, match=r"'.*gone' is a symbolic link to nothing"):
        check_writable(tmp_path / "gone" / "U.txt")


# -- no temporary file left behind ----------------------------------------------------------


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_exception_inside_atomic_output_leaves_nothing(tmp_path, error):
    target = tmp_path / "T.txt"
    with pytest.raises(error), atomic_output(target) as tmp:
        tmp.write_text("half")
        raise error("boom")
    assert list(tmp_path.iterdir()) == []
    target.write_text("old")
    with pytest.raises(error), atomic_output(target, overwrite=True) as tmp:
        tmp.write_text("half")
        raise error("boom")
    assert [p.name for p in tmp_path.iterdir()] == ["T.txt"] and target.read_text() == "old"


def test_a_write_past_the_file_size_limit_names_the_output(tmp_path):
    """``np.save`` past ``ulimit -f`` raises EFBIG without a file name; the error names the
    output (not its temporary file), and nothing is left behind. In a child process: the limit
    holds for the whole process."""
    import subprocess
    import sys

    code = """
import resource, signal, sys
import numpy as np
from pcreg._fs import atomic_output
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
for write in (lambda tmp: np.save(tmp, np.zeros(10_000)),
              lambda tmp: tmp.write_bytes(bytes(10_000))):
    try:
        with atomic_output(sys.argv[1]) as tmp:
            write(tmp)
    except OSError as err:
        print(err.errno, err.filename, err.strerror, sep="|")
"""
    target = tmp_path / "big.npy"
    done = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    lines = [line.split("|") for line in done.stdout.splitlines()]
    assert [line[:2] for line in lines] == [[str(errno.EIO), str(target)],
                                            [str(errno.EFBIG), str(target)]], done  # fmt: skip
    assert "is the disk full?" in lines[0][2] and lines[1][2] == "File too large", lines
    assert list(tmp_path.iterdir()) == []


def test_native_output_is_kept_off_the_terminal(tmp_path):
    """Open3D's PLY writer prints a line per value it fails to write (70-85 lines for a map
    cut short by ``ulimit -f``); :func:`quiet_native` takes them off file descriptor 2 and
    hands them over."""
    code = """
import resource, signal, sys
import numpy as np
import open3d as o3d
from pcreg._fs import quiet_native
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.zeros((20000, 3))))
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
with quiet_native() as printed:
    o3d.io.write_point_cloud(sys.argv[1], cloud, write_ascii=False)
print(printed[0].count("RPly"))
"""
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x.ply")],
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    assert int(done.stdout) > 10 and "RPly" not in done.stderr, done


def test_temp_file_names_carry_the_writer_pid(tmp_path):
    with atomic_output(tmp_path / "T.txt") as tmp:
        assert tmp.name.startswith(f".T.txt.pcreg-{os.getpid()}-{_host_tag()}-")
        assert tmp.name.endswith(".tmp.txt") and tmp.parent == tmp_path
        tmp.write_text("new")
    assert (tmp_path / "T.txt").read_text() == "new" and _temps(tmp_path) == []


def test_stale_temp_of_dead_pid_removed_by_next_write_live_ones_kept(tmp_path):
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead_pid = _dead_pid()
        stale = tmp_path / _temp_name("T.txt", dead_pid)
        alive = tmp_path / _temp_name("T.txt", live.pid)
        mine = tmp_path / _temp_name("T.txt", os.getpid())
        elsewhere = tmp_path / _temp_name("T.txt", dead_pid, tag="0badf00d")  # other machine
        other_target = tmp_path / _temp_name("R.txt", dead_pid)
        for path in (stale, alive, mine, elsewhere, other_target):
            path.write_text("partial")
        with atomic_output(tmp_path / "T.txt") as tmp:
            tmp.write_text("new")
        assert not stale.exists()
        assert alive.exists() and mine.exists() and elsewhere.exists() and other_target.exists()
        assert (tmp_path / "T.txt").read_text() == "new"
        check_writable(tmp_path / "R.txt")  # the up-front check clears them too
        assert not other_target.exists()
    finally:
        live.kill()
        live.wait()


_WRITER = """
import sys, time
from pcreg._fs import atomic_output, signals_raise
target, ready = sys.argv[1:3]
with signals_raise():
    with atomic_output(target, overwrite=True) as tmp:
        tmp.write_text("partial")
        open(ready, "w").close()
        time.sleep(60)
        tmp.write_text("never")
"""


def _default_signals() -> None:
    """In the writer, before exec: SIGTERM and SIGHUP at their defaults, whatever this test
    process inherited (under ``nohup`` SIGHUP is ignored, and ``signals_raise`` rightly leaves
    an ignored signal ignored)."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def _start_writer(tmp_path: Path, target: Path) -> subprocess.Popen[bytes]:
    ready = tmp_path / "ready"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_WRITER), str(target), str(ready)], env=env,
        preexec_fn=_default_signals,
    )  # fmt: skip
    for _ in range(600):
        if ready.exists() or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert ready.exists(), f"writer did not start (exit {proc.poll()})"
    ready.unlink()
    return proc


def test_sigkill_leaves_at_most_one_temp_that_the_next_write_removes(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    target = out / "T.txt"
    proc = _start_writer(tmp_path, target)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    left = _temps(out)
    assert len(left) <= 1 and not target.exists(), left
    with atomic_output(target) as tmp:
        tmp.write_text("second")
    assert _temps(out) == [] and target.read_text() == "second"


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_sigterm_inside_signals_raise_removes_the_temp(tmp_path, signame):
    target = tmp_path / "out" / "T.txt"
    target.parent.mkdir()
    target.write_text("old")
    proc = _start_writer(tmp_path, target)
    proc.send_signal(getattr(signal, signame))
    assert proc.wait() == 128 + getattr(signal, signame)
    assert _temps(target.parent) == [] and target.read_text() == "old"


def test_signals_raise_restores_the_handlers():
    from pcreg._fs import Terminated, signals_raise

    # a handler left by an earlier test in this process (Ray installs one) would be kept, by
    # design: start from the default one, and put the earlier one back afterwards
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        before = signal.getsignal(signal.SIGTERM)
        with signals_raise():
            assert signal.getsignal(signal.SIGTERM) is not before
            with pytest.raises(Terminated) as err:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # the handler raises at the next bytecode boundary
        assert err.value.code == 143 and "SIGTERM" in str(err.value)
        assert signal.getsignal(signal.SIGTERM) is before
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_swallowed_signal_still_stops_an_output_from_being_written(tmp_path):
    """A library that catches the signal's exception and goes on (an interrupted ``import
    onnxruntime`` came back as ImportError, taken for a missing package): nothing is written
    after it within the block, and outside any block the record changes nothing."""
    from pcreg._fs import (
        Terminated,
        atomic_output,
        forget_signals,
        raise_if_signalled,
        signals_raise,
    )

    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    target = tmp_path / "out.txt"
    try:
        with pytest.raises(Terminated), signals_raise():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            except SystemExit:  # swallowed, as the library did
                pass
            with atomic_output(target) as tmp:
                tmp.write_text("written after the signal")
        assert list(tmp_path.iterdir()) == []
        raise_if_signalled()  # the block is over: nothing to raise
        with atomic_output(target) as tmp:
            tmp.write_text("a later output")
        assert target.read_text() == "a later output"
    finally:
        forget_signals()
        signal.signal(signal.SIGTERM, previous)


def test_after_a_signal_only_pcregs_own_line_reaches_stderr():
    """``signals_raise(quiet_stderr=True)`` (the command line): what C++ code writes to file
    descriptor 2 after SIGTERM (Ray's core worker shutting down) is silenced, and
    ``write_stderr`` still reaches the terminal."""
    import subprocess
    import sys

    script = (
        "import os, signal\n"
        "from pcreg._fs import Terminated, signals_raise, write_stderr\n"
        "try:\n"
        "    with signals_raise(quiet_stderr=True):\n"
        "        os.write(2, b'before\\n')\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "except Terminated as err:\n"
        "    os.write(2, b'task_manager.cc: Failed to push error to driver\\n')\n"
        "    write_stderr(f'pcreg: {err}\\n')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["before", "pcreg: terminated by SIGTERM"]


def test_an_output_group_writes_all_its_files_or_none(tmp_path):
    """``output_group``: files written inside appear only when the block ends; an exception
    (a signal while the last one was drawn) leaves none of them and no temporary file."""
    from pcreg._fs import Terminated, atomic_output, output_group

    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    with pytest.raises(Terminated), output_group():
        with atomic_output(a) as tmp:
            tmp.write_text("a")
        assert not a.exists()  # finished, not moved yet
        with atomic_output(b) as tmp:
            tmp.write_text("b")
            raise Terminated(signal.SIGTERM)  # mid-way through the second
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    with output_group():
        for path in (a, b):
            with atomic_output(path) as tmp:
                tmp.write_text(path.stem)
        assert not a.exists() and not b.exists()
    assert (a.read_text(), b.read_text()) == ("a", "b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]
    with atomic_output(tmp_path / "c.txt") as tmp:  # outside a group: moved at once, as before
        tmp.write_text("c")
    assert (tmp_path / "c.txt").read_text() == "c"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_a_group_moves_its_files_ends_the_run_after_all_moved(
    tmp_path, monkeypatch, signum
):
    """A SIGTERM that arrives while an output group moves its files (taken by another thread,
    so pcreg's handler runs in the middle of the moves) no longer stops them half-way: both
    files are in place, then the run ends. Ctrl-C too (a hostile run's SIGINT between two
    moves left an earlier map half-replaced, with Python's KeyboardInterrupt)."""
    import os
    import threading

    from pcreg._fs import Terminated, atomic_output, output_group, signals_raise

    real, moved = os.replace, []

    def replace(src, dst):
        moved.append(dst)
        if len(moved) == 1:  # the first move: a signal from another thread
            sender = threading.Thread(target=os.kill, args=(os.getpid(), signum))
            sender.start()
            sender.join()
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    with pytest.raises(Terminated) as ended, signals_raise(), output_group():
        for path in (a, b):
            with atomic_output(path) as tmp:
                tmp.write_text(path.stem)
    assert ended.value.code == 128 + signum
    assert (a.read_text(), b.read_text()) == ("a", "b") and len(moved) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]
