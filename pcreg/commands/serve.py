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

import argparse
import contextlib
import io
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable
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


def run(args: argparse.Namespace) -> int:
    from pcreg.commands._client import socket_path
    from pcreg.errors import InputError

    path = args.socket or socket_path()
    if args.idle_timeout < 0:
        raise InputError("--idle-timeout", f"must be >= 0 seconds, got {args.idle_timeout}")
    listener = _listen(path)
    try:
        _warm([m for m in args.preload.split(",") if m.strip()])
        sys.stderr.write(f"pcreg: serving `pcreg register` on {path}\n")
        sys.stderr.flush()
        _loop(listener, args.idle_timeout or None, args.main)
    finally:
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return 0


def _listen(path: Path) -> socket.socket:
    """A listening socket at ``path``, its directory made private (0700). Refuses a path
    where a server already answers; a stale socket file is replaced."""
    from pcreg.errors import InputError

    if len(os.fsencode(path)) > 107:  # sockaddr_un's sun_path holds 108 bytes with the NUL
        raise InputError(path, "socket path too long (at most 107 bytes): pass a shorter --socket")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.parent.stat().st_uid != os.getuid():
        raise InputError(path.parent, "belongs to another user: pass --socket elsewhere")
    os.chmod(path.parent, 0o700)
    if path.exists() or path.is_symlink():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # stale: its server is gone
        else:
            raise InputError(path, "a server is already listening here")
        finally:
            probe.close()
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


def _loop(listener: socket.socket, idle_timeout: float | None, main: Callable) -> None:
    listener.settimeout(idle_timeout)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            logger.info("no request for %.0f s: stopping", idle_timeout)
            return
        with conn:
            conn.settimeout(None)
            try:
                request = json.loads(_read_request(conn))
                reply = handle(request, main)
            except (ValueError, KeyError, TypeError) as err:
                reply = {"stdout": "", "stderr": f"pcreg: error: bad request: {err}\n", "exit": 2}
            with contextlib.suppress(OSError):  # the client went away (Ctrl-C)
                conn.sendall(json.dumps(reply).encode())
        if reply["exit"] in (130, 143):  # Ctrl-C or SIGTERM reached the server mid-request
            return


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
