"""``pcreg serve``: keep torch, Open3D and the models warm for many ``pcreg register`` calls.

Use it when one shell session, script or tool calls ``pcreg register`` many times on single
pairs: each call then costs about the registration itself instead of ~2 s of imports and
model loading (BENCHMARKS.md, "On a busy machine"). For many pairs at once, ``pcreg batch``
(one process, or Ray workers) is the better tool; from Python, ``pcreg.register`` keeps its
models in the process anyway.

The server listens on a Unix socket in a directory only this user may enter
(:func:`pcreg.commands._client.socket_path`) and runs one request at a time in its main
thread, exactly as the command line would run it (``pcreg.cli.main``, passed in): same checks, same
messages, same exit codes, files written by the server with this user's rights. Each reply
carries the command's stdout, stderr and exit code. It stops on Ctrl-C, SIGTERM, or after
``--idle-timeout`` seconds without a request, and removes its socket. A client whose server
is gone runs the command itself.
"""

from __future__ import annotations

import _thread
import argparse
import contextlib
import io
import json
import logging
import os
import select
import signal
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["add_parser", "handle", "run"]

logger = logging.getLogger(__name__)


def add_parser(sub) -> None:
    cmd = sub.add_parser(
        "serve",
        help="keep the models warm for many `pcreg register` calls (Unix socket)",
        description="Serve `pcreg register` calls from this process: while it runs, "
        "`pcreg register` hands its arguments to it over a Unix socket and answers in about the "
        "time of the registration alone. Stops on Ctrl-C / SIGTERM or after --idle-timeout.",
    )
    cmd.add_argument(
        "--socket", type=Path, help="socket path (default: $XDG_RUNTIME_DIR/pcreg/serve.sock)"
    )
    cmd.add_argument(
        "--idle-timeout",
        type=float,
        default=3600.0,
        metavar="S",
        help="stop after S seconds without a request (default 3600; 0: never)",
    )
    cmd.add_argument(
        "--preload",
        default="indoor,outdoor",
        help="models to load before the first request (comma-separated; '' for none)",
    )
    cmd.set_defaults(func=run)


#: the longest --idle-timeout (a year): the socket's timeout is a C time_t, which ``inf`` or
#: 1e12 overflowed (an internal error once the server had started)
MAX_IDLE_S = 365 * 24 * 3600.0


def run(args: argparse.Namespace) -> int:
    from pcreg.commands._client import code_fingerprint, socket_path
    from pcreg.errors import InputError

    path = args.socket or socket_path()
    if not 0 <= args.idle_timeout <= MAX_IDLE_S:  # NaN fails the comparison too
        raise InputError("--idle-timeout", f"must be 0 (never) to {MAX_IDLE_S:.0f} seconds (a "
                         f"year), got {args.idle_timeout}")  # fmt: skip
    preload = [m.strip() for m in args.preload.split(",") if m.strip()]
    from pcreg.registration.shipped import weights_path

    for model in preload:  # a name or path that is not there, before the socket's folder is made
        weights_path(model)
    _check_free(path)
    _warm(preload)  # before listening: warm at once
    listener = _listen(path)
    inode = path.stat().st_ino
    try:
        sys.stderr.write(f"pcreg: serving `pcreg register` on {path}\n")
        sys.stderr.flush()
        _loop(listener, args.idle_timeout or None, args.main, code_fingerprint())
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            if path.lstat().st_ino == inode:  # ours, not a newer server's
                path.unlink()
    return 0


def _check_free(path: Path) -> None:
    """Refuse a socket path nobody could serve on safely: too long, in a directory others may
    enter or that another user owns, a file that is not a socket, or a live server's socket.
    A stale socket (its server gone) is removed. Creates the directory (0700) if needed."""
    from pcreg.errors import InputError

    if len(os.fsencode(path)) > 103:  # sun_path: 108 bytes on Linux, 104 on macOS, with NUL
        raise InputError(path, "socket path too long (at most 103 bytes): pass a shorter --socket")
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700)
    directory = path.parent.stat()
    if directory.st_uid != os.getuid():
        raise InputError(path.parent, "belongs to another user: pass --socket elsewhere")
    if directory.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise InputError(
            path.parent, "others may enter this directory: pass a --socket in a private (0700) one"
        )
    if not (path.exists() or path.is_symlink()):
        return
    if not stat.S_ISSOCK(path.lstat().st_mode):
        raise InputError(path, "exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except OSError:
        path.unlink()  # stale: its server is gone
    else:
        raise InputError(path, "a server is already listening here")
    finally:
        probe.close()


def _listen(path: Path) -> socket.socket:
    """A listening socket at ``path`` (checked by :func:`_check_free`)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(16)
    return listener


def _warm(models: list[str]) -> None:
    """Import the registration path and load ``models`` (names or paths), so the first
    request pays none of it."""
    from pcreg.api import load_model

    for model in models:
        load_model(model.strip())
        logger.info("loaded %s", model)


#: seconds a client may take to send its request (it sends it at once)
REQUEST_TIMEOUT_S = 10.0


def _loop(listener: socket.socket, idle_timeout: float | None, main: Callable, code: str) -> None:
    listener.settimeout(idle_timeout)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            logger.info("no request for %.0f s: stopping", idle_timeout)
            return
        with conn:
            conn.settimeout(REQUEST_TIMEOUT_S)
            try:
                request = json.loads(_read_request(conn))
                if not isinstance(request, dict):
                    raise TypeError("not a JSON object")
                if request.get("code") != code:
                    logger.info("declined: a client of other pcreg code (%s)", request.get("code"))
                    reply = {"decline": "this server runs other pcreg code"}
                else:
                    conn.settimeout(None)
                    fired = threading.Event()
                    try:
                        with _abort_when_gone(conn, fired):
                            reply = handle(request, main)
                    except KeyboardInterrupt:  # the watcher's, just after the request ended
                        if not fired.is_set():
                            raise
                        reply = {"stdout": "", "stderr": "pcreg: interrupted\n", "exit": 130}
                    if reply["exit"] == 130 and not fired.is_set():
                        return  # Ctrl-C on the server's own terminal
            except (ValueError, KeyError, TypeError, AttributeError, OSError) as err:
                reply = {"stdout": "", "stderr": f"pcreg: error: bad request: {err}\n", "exit": 2}
            if reply.get("exit") in (129, 143):  # the server's own signal: say whose it was
                name = signal.Signals(reply["exit"] - 128).name
                reply["stderr"] = (f"pcreg: terminated by {name}, sent to the server (pcreg "
                                   f"serve, pid {os.getpid()}) before it answered\n")  # fmt: skip
            with contextlib.suppress(OSError):  # the client went away (Ctrl-C)
                conn.sendall(json.dumps(reply).encode())
        if reply.get("exit") == 143:  # SIGTERM reached the server mid-request
            return


@contextlib.contextmanager
def _abort_when_gone(conn: socket.socket, fired: threading.Event) -> Iterator[None]:
    """Interrupt the request (as Ctrl-C would: exit 130, temporary files removed, no output
    written) when its client closes its end: it was interrupted or killed, and nobody would
    read the answer. Polls the socket for a hang-up from a helper thread; ``fired`` is set
    before it interrupts."""
    done = threading.Event()

    def watch() -> None:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLHUP)
        while not done.is_set():
            if poller.poll(100) and not done.is_set():
                logger.info("client gone: interrupting its request")
                fired.set()
                _thread.interrupt_main(INTERRUPT_SIGNAL)
                return

    # its own signal, not SIGINT: a server started in the background by a script (`pcreg
    # serve &`) has SIGINT ignored, and interrupt_main(SIGINT) then does nothing
    previous = signal.signal(INTERRUPT_SIGNAL, _keyboard_interrupt)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        signal.signal(INTERRUPT_SIGNAL, previous)


#: the signal the hang-up watcher raises in the main thread (in-process, never sent)
INTERRUPT_SIGNAL = signal.SIGUSR1


def _keyboard_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _read_request(conn: socket.socket) -> bytes:
    chunks = []
    while chunk := conn.recv(1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


class _StderrNow(logging.StreamHandler):
    """A log handler writing to whatever ``sys.stderr`` is at the time (the request's)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.setStream(sys.stderr)
        super().emit(record)


def handle(request: dict, main: Callable[..., int]) -> dict:
    """Run one command line through ``main`` (:func:`pcreg.cli.main`) as ``pcreg`` would
    (``request``: ``argv``, ``cwd``, ``env`` of ``PCREG_*`` variables) and return its
    ``stdout``, ``stderr`` and ``exit`` code."""
    argv = [str(a) for a in request["argv"]]
    env = {str(k): str(v) for k, v in request.get("env", {}).items() if str(k).startswith("PCREG_")}
    logger.info("request: %s", " ".join(argv))
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    saved_logging = root.handlers[:], root.level
    handler = _StderrNow()  # the request's log lines go to its stderr only
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.handlers = [handler]
    root.setLevel(logging.DEBUG if "-v" in argv or "--verbose" in argv else logging.WARNING)
    saved_env = {k: os.environ.get(k) for k in {*env, *_pcreg_vars()}}
    cwd = os.getcwd()
    start = time.perf_counter()
    try:
        os.environ.update(env)
        for k in set(saved_env) - set(env):
            os.environ.pop(k, None)  # the client's PCREG_* environment, not the server's
        os.chdir(request["cwd"])
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv, served_here=True)
            except SystemExit as exit_:  # argparse: usage errors (2), --help (0)
                code = exit_.code if isinstance(exit_.code, int) else 2
    except OSError as error:  # the client's directory is gone or not ours to enter
        code = 2
        err.write(f"pcreg: error: {request.get('cwd')}: {error.strerror or error}\n")
    finally:
        root.handlers, level = saved_logging
        root.setLevel(level)
        os.chdir(cwd)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    logger.info("%s -> exit %d in %.2f s", " ".join(argv), code, time.perf_counter() - start)
    return {"stdout": out.getvalue(), "stderr": err.getvalue(), "exit": int(code)}


def _pcreg_vars() -> list[str]:
    return [k for k in os.environ if k.startswith("PCREG_")]
