"""``pcreg serve`` and its client (pcreg/commands/serve.py, _client.py): what is forwarded,
which sockets are trusted, and a real server answering real commands as the command line
would, relative paths and exit codes included."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pcreg.commands import _client
from pcreg.geometry import pose_errors

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="Unix sockets")


def test_only_register_without_a_window_is_forwarded() -> None:
    assert _client.servable(["register", "a.ply", "b.ply", "--json"])
    assert _client.servable(["-v", "register", "a.ply", "b.ply"])
    assert not _client.servable(["register", "a.ply", "b.ply", "--show"])
    assert not _client.servable(["register", "--help"])
    assert not _client.servable(["batch", "m.csv"])
    assert not _client.servable(["serve"])
    assert not _client.servable([])


def _bound(path: Path) -> None:
    """A socket file with nobody listening (a server that died)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()


def test_sockets_in_directories_others_may_enter_are_ignored(tmp_path, monkeypatch) -> None:
    private, shared = tmp_path / "private", tmp_path / "shared"
    private.mkdir(mode=0o700)
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    for d in (private, shared):
        _bound(d / "s.sock")
    (private / "file").write_text("")
    assert _client._trusted(private / "s.sock")
    assert not _client._trusted(shared / "s.sock")
    assert not _client._trusted(private / "file")  # not a socket
    assert not _client._trusted(private / "missing.sock")
    # a stale socket: no answer, the caller runs the command itself
    monkeypatch.delenv("PCREG_NO_SERVER", raising=False)
    monkeypatch.setenv("PCREG_SOCKET", str(private / "s.sock"))
    assert _client.forward(["register", "a", "b"]) is None
    monkeypatch.setenv("PCREG_NO_SERVER", "1")
    assert _client.forward(["register", "a", "b"]) is None


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real `pcreg serve -v` on its own socket (no model preloaded), its stderr in a file,
    started with SIGINT ignored, as `pcreg serve &` in a script starts it."""
    root = tmp_path_factory.mktemp("serve")
    sock = root / "run" / "s.sock"
    log = (root / "server.log").open("w")
    env = {k: v for k, v in os.environ.items() if k != "PCREG_NO_SERVER"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pcreg", "-v", "serve", "--socket", str(sock), "--preload", "",
         "--idle-timeout", "600"],
        stderr=log, stdout=subprocess.DEVNULL, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not sock.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sock.exists(), (root / "server.log").read_text()
    yield sock, root / "server.log", proc, env
    proc.terminate()
    proc.wait(timeout=60)
    log.close()


def _requests(log: Path) -> str:
    """What the server has logged so far (its -v log: requests and their ends)."""
    return log.read_text()


def _pcreg(args, env, cwd, sock):
    env = {**env, "PCREG_SOCKET": str(sock)}
    return subprocess.run(
        [sys.executable, "-m", "pcreg", *args], env=env, cwd=cwd, capture_output=True, text=True
    )


def test_server_answers_as_the_command_line(server, shared_data, tmp_path) -> None:
    sock, log, proc, env = server
    demo = shared_data / "geotransformer_repo" / "demo"
    for name in ("src.npy", "ref.npy"):
        (tmp_path / name).symlink_to(demo / name)
    args = ["register", "src.npy", "ref.npy", "--json", "--out", "T.txt"]  # relative paths
    served = _pcreg(args, env, tmp_path, sock)
    assert served.returncode == 0, served.stderr
    assert "-> exit 0" in log.read_text()  # the server ran it
    record = json.loads(served.stdout)
    src = np.load(demo / "src.npy")
    err = pose_errors(np.asarray(record["transform"]), np.load(demo / "gt.npy"), src)
    assert err["rmse_m"] < 0.2  # 3DMatch's success criterion
    written = np.loadtxt(tmp_path / "T.txt")  # in the client's directory
    np.testing.assert_allclose(written, record["transform"], atol=1e-6)
    # the same command in its own process gives the same transform
    local = _pcreg(args[:-2], {**env, "PCREG_NO_SERVER": "1"}, tmp_path, sock)
    own = json.loads(local.stdout)["transform"]
    np.testing.assert_allclose(own, record["transform"], atol=1e-5)
    # an existing output without --force: exit 2, one line, the server's refusal
    again = _pcreg(args, env, tmp_path, sock)
    assert again.returncode == 2
    assert again.stderr.count("\n") == 1 and "T.txt" in again.stderr
    missing = _pcreg(["register", "nope.ply", "ref.npy"], env, tmp_path, sock)
    assert missing.returncode == 2 and "nope.ply" in missing.stderr
    assert missing.stderr.count("\n") == 1
    assert proc.poll() is None  # still serving after the errors


def test_a_second_server_on_a_live_socket_is_refused(server) -> None:
    sock, _, _, env = server
    proc = subprocess.run(
        [sys.executable, "-m", "pcreg", "serve", "--socket", str(sock), "--preload", ""],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and "already listening" in proc.stderr
    assert sock.exists()  # the first server's socket is left alone


def test_nothing_is_forwarded_with_stdout_closed_or_a_prefix_of_show(monkeypatch) -> None:
    assert not _client.servable(["register", "a", "b", "--sh"])  # refused here, not there
    assert not _client.servable(["register", "a", "b", "--he"])
    assert _client.servable(["register", "a", "b", "--strict", "--out=T.txt"])
    monkeypatch.delenv("PCREG_NO_SERVER", raising=False)
    monkeypatch.setattr(sys, "stdout", None)  # the command line's own check says exit 2
    assert _client.forward(["register", "a", "b"]) is None


def test_serve_refuses_unsafe_socket_paths(tmp_path) -> None:
    from pcreg.commands.serve import _check_free
    from pcreg.errors import InputError

    private = tmp_path / "p"
    private.mkdir(mode=0o700)
    (private / "results.txt").write_text("keep me")
    with pytest.raises(InputError, match="not a socket"):
        _check_free(private / "results.txt")
    assert (private / "results.txt").read_text() == "keep me"
    shared = tmp_path / "s"
    shared.mkdir()
    os.chmod(shared, 0o755)
    with pytest.raises(InputError, match="others may enter"):
        _check_free(shared / "s.sock")
    assert oct(shared.stat().st_mode & 0o777) == "0o755"  # left as it was
    with pytest.raises(InputError, match="too long"):
        _check_free(private / ("x" * 120))
    _bound(private / "stale.sock")
    _check_free(private / "stale.sock")  # a dead server's socket is removed
    assert not (private / "stale.sock").exists()
    _check_free(tmp_path / "new" / "s.sock")  # a new directory is made private
    assert oct((tmp_path / "new").stat().st_mode & 0o777) == "0o700"


def test_a_client_of_other_code_runs_itself(server, monkeypatch) -> None:
    sock, log, proc, _ = server
    monkeypatch.delenv("PCREG_NO_SERVER", raising=False)
    monkeypatch.setenv("PCREG_SOCKET", str(sock))
    monkeypatch.setattr(_client, "code_fingerprint", lambda: "an older checkout")
    assert _client.forward(["register", "a.ply", "b.ply"]) is None
    assert "declined" in log.read_text()
    assert proc.poll() is None


def test_a_killed_client_stops_its_request_and_nothing_is_written(server, shared_data, tmp_path):
    sock, log, proc, env = server
    kitti = shared_data / "kitti00_scancontext"
    out = tmp_path / "killed.txt"
    client = subprocess.Popen(
        [sys.executable, "-m", "pcreg", "register", str(kitti / "000094.bin"),
         str(kitti / "000095.bin"), "--out", str(out)],
        env={**env, "PCREG_SOCKET": str(sock)}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while "000094.bin" not in _requests(log) and time.monotonic() < deadline:
        time.sleep(0.05)  # the server has the request
    time.sleep(0.3)
    client.kill()
    client.wait()
    deadline = time.monotonic() + 60
    while "killed.txt -> exit" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "killed.txt -> exit 130" in log.read_text()  # interrupted, as Ctrl-C would
    time.sleep(3)  # what the registration would have needed to finish and write
    assert not out.exists() and not list(tmp_path.glob(".killed.txt*"))
    assert proc.poll() is None  # still serving
    again = _pcreg(["register", "nope.ply", "x.ply"], env, tmp_path, sock)
    assert again.returncode == 2 and "nope.ply" in again.stderr


def test_a_bad_preload_creates_no_socket_folder(tmp_path, capsys) -> None:
    """``--preload`` names a model that is not there: refused before the socket's folder is
    made (it was made, then the error came)."""
    from pcreg.cli import main

    folder = tmp_path / "sock"
    assert main(["serve", "--socket", str(folder / "x.sock"), "--preload", "bogus"]) == 2
    assert "bogus: unknown model" in capsys.readouterr().err
    assert not folder.exists()


@pytest.mark.parametrize("value", ["nan", "-1", "inf", "1e12"])
def test_a_bad_idle_timeout_is_one_clean_line(capsys, value) -> None:
    """Refused before the server starts (inf and 1e12 overflowed the socket's C timeout: an
    internal error after "serving")."""
    from pcreg.cli import main

    assert main(["serve", "--idle-timeout", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"pcreg: error: --idle-timeout: must be 0 (never) to 31536000 seconds (a "
                   f"year), got {float(value)}"]  # fmt: skip


def test_a_sigterm_mid_request_ends_server_and_request_with_one_line_each(tmp_path) -> None:
    """SIGTERM to a server in the middle of a request: the request ends (exit 143) with one
    line on the client's stderr saying the signal was the server's, and the server with its
    own on the server's (the request's line went to the server's terminal, and the client
    exited 143 without a word), nothing written by either."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    sock, log_path = run / "s.sock", tmp_path / "server.log"
    rng = np.random.default_rng(0)
    for name in ("a", "b"):  # random points: a search that takes seconds, then refuses
        np.save(tmp_path / f"{name}.npy", rng.uniform(0, 3, (6000, 3)))
    env = {k: v for k, v in os.environ.items() if k != "PCREG_NO_SERVER"}
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "pcreg", "-v", "serve", "--socket", str(sock), "--preload",
             "", "--idle-timeout", "120"], stderr=log, stdout=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while not sock.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sock.exists(), log_path.read_text()
        out = tmp_path / "T.txt"
        client = subprocess.Popen(
            [sys.executable, "-m", "pcreg", "register", str(tmp_path / "a.npy"),
             str(tmp_path / "b.npy"), "--out", str(out)],
            env={**env, "PCREG_SOCKET": str(sock)}, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while "request: register" not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # into the search
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 143
        _, client_err = client.communicate(timeout=60)
    assert client.returncode == 143
    (line,) = client_err.strip().splitlines()  # whose signal it was: the server's
    assert line == (f"pcreg: terminated by SIGTERM, sent to the server (pcreg serve, pid "
                    f"{server.pid}) before it answered"), client_err  # fmt: skip
    lines = [ln for ln in log_path.read_text().splitlines() if ln.startswith("pcreg: ")]
    assert lines[-1] == "pcreg: terminated by SIGTERM", lines
    assert lines.count("pcreg: terminated by SIGTERM") == 1, lines
    assert not out.exists() and not sock.exists()
