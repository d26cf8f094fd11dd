"""The client side of ``pcreg serve``: hand a ``pcreg register`` to a running server.

A whole ``pcreg register`` process spends most of its time before the registration starts:
importing torch (about 1 s on the 2-core Xeon) and Open3D (0.6 s), loading the weights and
warming the first call up. A server started once with ``pcreg serve`` keeps all of that warm;
while it runs, ``pcreg register`` sends it its arguments, working directory and ``PCREG_*``
environment over a Unix socket and prints what it answers, with its exit code. This module
imports only the standard library, so that the client's own start stays at the
interpreter's.

The socket lives in a directory only this user can enter (``$XDG_RUNTIME_DIR/pcreg`` or
``/tmp/pcreg-UID``, mode 0700); a socket whose directory another user owns or others may
enter is ignored. Where no server answers (none started, or a stale socket), the command runs
in its own process as usual. ``PCREG_NO_SERVER=1`` never asks one.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
from pathlib import Path

__all__ = ["ENV_NO_SERVER", "ENV_SOCKET", "code_fingerprint", "forward", "servable", "socket_path"]

ENV_SOCKET = "PCREG_SOCKET"  #: overrides the socket's path
ENV_NO_SERVER = "PCREG_NO_SERVER"  #: "1": always run in this process
#: subcommands a server runs; --show opens a window on this display, so it stays here
SERVED = ("register",)


def socket_path() -> Path:
    """Where ``pcreg serve`` listens by default (``$PCREG_SOCKET`` overrides it)."""
    if os.environ.get(ENV_SOCKET):
        return Path(os.environ[ENV_SOCKET])
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    tmp = os.environ.get("TMPDIR") or "/tmp"
    base = Path(runtime) / "pcreg" if runtime else Path(tmp) / f"pcreg-{os.getuid()}"
    return base / "serve.sock"


#: options that must run here: a window on this display, and help (a prefix of either, e.g.
#: ``--sh``, runs here too, where the parser refuses it: options are never abbreviated)
LOCAL_OPTIONS = ("--show", "--help")


def servable(argv: list[str]) -> bool:
    """Whether a server may run this command line: a served subcommand, without ``--show`` or
    help (nor a prefix of either)."""
    command = next((a for a in argv if not a.startswith("-")), None)
    if command not in SERVED or "-h" in argv:
        return False
    options = [a.split("=", 1)[0] for a in argv if a.startswith("--") and len(a) > 2]
    return not any(o.startswith(a) for a in options for o in LOCAL_OPTIONS)


def code_fingerprint() -> str:
    """The installed pcreg code: its directory, and the count, total size and latest change of
    its Python files. A server answers only clients whose fingerprint is its own, so an
    update of the package never leaves an old server answering (~2 ms for ~250 files)."""
    package = Path(__file__).resolve().parents[1]
    count = size = latest = 0
    stack = [package]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif entry.name.endswith(".py"):
                    st = entry.stat()
                    count, size, latest = count + 1, size + st.st_size, max(latest, st.st_mtime_ns)
    return f"{package}:{count}:{size}:{latest}"


def _trusted(path: Path) -> bool:
    """A socket in a directory of this user's that nobody else may enter."""
    try:
        directory = path.parent.stat()
        sock = path.lstat()
    except OSError:
        return False
    uid = os.getuid()
    private = not directory.st_mode & (stat.S_IRWXG | stat.S_IRWXO)
    return (
        stat.S_ISSOCK(sock.st_mode) and sock.st_uid == uid and directory.st_uid == uid and private
    )


def forward(argv: list[str]) -> int | None:
    """Run ``argv`` on a running server: print its stdout and stderr here and return its exit
    code; None where no server takes it (the caller runs the command itself): none running, a
    stale socket, a server of other pcreg code, stdout closed (the command line's own check
    says so), or the working directory gone."""
    if os.environ.get(ENV_NO_SERVER) == "1" or not servable(argv) or sys.stdout is None:
        return None
    path = socket_path()
    if not _trusted(path):
        return None
    try:
        request = {
            "argv": argv,
            "cwd": os.getcwd(),
            "env": {k: v for k, v in os.environ.items() if k.startswith("PCREG_")},
            "code": code_fingerprint(),
        }
    except OSError:  # the working directory was removed
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(str(path))
            conn.sendall(json.dumps(request).encode() + b"\n")
            conn.shutdown(socket.SHUT_WR)
            reply = _read_all(conn)
    except OSError:  # nobody listening (a stale socket), or the server went away
        return None
    except KeyboardInterrupt:  # closing the socket tells the server to stop the request
        if sys.stderr is not None:
            sys.stderr.write("pcreg: interrupted\n")
        return 130
    try:
        answer = json.loads(reply)
        code = int(answer["exit"])
    except (ValueError, KeyError, TypeError):  # declined, or not a reply at all
        return None
    try:
        if answer.get("stdout"):
            sys.stdout.write(answer["stdout"])
            sys.stdout.flush()
        if answer.get("stderr"):
            sys.stderr.write(answer["stderr"])
    except (OSError, ValueError, AttributeError) as err:  # stdout closed or full
        if sys.stderr is not None:
            sys.stderr.write(f"pcreg: error: stdout: {getattr(err, 'strerror', None) or err}\n")
        return 2
    return code


def _read_all(conn: socket.socket) -> bytes:
    chunks = []
    while chunk := conn.recv(1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)
