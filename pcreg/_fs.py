"""Atomic file output: write to a temporary file beside the target, fsync, then rename.

A reader (or a crash) therefore sees either the old file or the complete new one, never a
half-written file, and an existing file is only replaced when the caller asks for it. Only
regular files are written or replaced: an existing symbolic link, FIFO, socket, device or
directory at the output path is refused, with or without ``overwrite``.

Temporary files are named ``.<name>.pcreg-<pid>-<tag>-<random>.tmp<suffix>`` (``tag`` tells
this machine and PID namespace from others sharing the directory). They are removed on every
exit path that runs ``finally`` (exceptions, KeyboardInterrupt, and SIGTERM/SIGHUP/SIGINT inside
:func:`signals_raise`). A process killed outright (SIGKILL, power loss) leaves its temporary
file behind; the next write to the same target removes it once its writer's pid is gone.
Temporary files of live processes are never touched.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import re
import signal
import socket
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from pcreg.errors import OutputExistsError, UnwritableOutputError

__all__ = [
    "Terminated",
    "atomic_output",
    "check_writable",
    "forget_signals",
    "output_group",
    "raise_if_signalled",
    "received_signal",
    "signals_raise",
]

_TEMP_MARK = "pcreg"


def check_writable(path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Check that ``path`` can be created (or replaced when ``overwrite``) before doing work.

    Raises:
        OutputExistsError: the file exists and ``overwrite`` is False.
        UnwritableOutputError: the directory is missing or not writable, or ``path`` is a
            directory, a symbolic link or another non-regular file (FIFO, socket, device),
            whatever ``overwrite`` says.
    """
    path = Path(path)
    _check_target(path, overwrite=overwrite)
    parent = _parent(path)
    if not parent.is_dir():
        if parent.exists():
            raise UnwritableOutputError(path, f"{str(parent)!r} is not a directory")
        if parent.is_symlink():
            raise UnwritableOutputError(path, f"{str(parent)!r} is a symbolic link to nothing")
        raise UnwritableOutputError(path, f"directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UnwritableOutputError(
            path, f"cannot create files in {str(parent)!r} (directory is not writable)"
        )
    # access() says yes to root everywhere and knows nothing of read-only or pseudo file
    # systems: create (and remove) a probe file, the way the real write will start.
    _make_temp(path).unlink()
    return path


def _parent(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def _check_target(path: Path, *, overwrite: bool) -> None:
    """Refuse an existing non-regular ``path`` always, an existing file unless ``overwrite``."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError:  # e.g. a parent component is not a directory: reported by the caller
        return
    if stat.S_ISLNK(st.st_mode):
        raise UnwritableOutputError(path, "is a symbolic link; remove it or name its target")
    if stat.S_ISDIR(st.st_mode):
        raise UnwritableOutputError(path, "is a directory, expected a file path")
    if not stat.S_ISREG(st.st_mode):
        kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
        raise UnwritableOutputError(
            path, f"is {kind}, not a regular file; pcreg only writes regular files"
        )
    if not overwrite:
        raise OutputExistsError(
            path, "already exists (use --force, or overwrite=True in Python, to replace it)"
        )


@functools.cache
def _host_tag() -> str:
    """8 hex digits naming this machine and PID namespace: a pid in a temporary file's name
    is only looked up when the file was written under the same tag."""
    try:
        pid_ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pid_ns = ""
    key = f"{socket.gethostname()}|{pid_ns}".encode()
    return hashlib.blake2b(key, digest_size=4).hexdigest()


def _pid_alive(pid: int) -> bool:
    """False only when no process ``pid`` exists (its signal-0 lookup fails as such)."""
    if os.name == "nt":  # os.kill there terminates the process: never treat a pid as dead
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, owned by someone else
        return True
    return True


def _temp_pattern(path: Path) -> re.Pattern[str]:
    return re.compile(
        re.escape(f".{path.name}.{_TEMP_MARK}-")
        + r"(?P<pid>[0-9]+)-(?P<tag>[0-9a-f]{8})-[a-z0-9_]+"
        + re.escape(f".tmp{path.suffix}")
    )


def _remove_stale_temps(path: Path) -> None:
    """Remove temporary files left for ``path`` by writers of this machine that are dead."""
    if os.name == "nt":
        return
    prefix = f".{path.name}.{_TEMP_MARK}-"
    pattern = _temp_pattern(path)
    tag = _host_tag()
    parent = _parent(path)
    try:
        names = [name for name in os.listdir(parent) if name.startswith(prefix)]
    except OSError:
        return
    for name in names:
        match = pattern.fullmatch(name)
        if match is None or match["tag"] != tag or _pid_alive(int(match["pid"])):
            continue
        with contextlib.suppress(OSError):  # gone already, or not ours to remove
            if stat.S_ISREG(os.lstat(parent / name).st_mode):
                os.unlink(parent / name)


def _make_temp(path: Path, *, sweep: bool = True) -> Path:
    """An empty temporary file beside ``path`` (same suffix), or UnwritableOutputError.

    With ``sweep``, stale temporary files for the same target (their writer was killed) are
    removed first.
    """
    parent = _parent(path)
    if sweep:
        _remove_stale_temps(path)
    try:
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{path.name}.{_TEMP_MARK}-{os.getpid()}-{_host_tag()}-",
            suffix=f".tmp{path.suffix}",
            dir=parent,
        )
    except OSError as err:
        raise UnwritableOutputError(
            path, f"cannot create files in {str(parent)!r} ({err.strerror})"
        ) from None
    os.close(fd)
    return Path(tmp_name)


#: errors only writing raises: reported with the output's name (a writer such as ``np.save``
#: raises them without one, and the temporary file's name means nothing to the user); not
#: EIO, which reading an input inside the block raises too
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS})
#: numpy's ``tofile`` cut short (a full disk, ``ulimit -f``): an OSError with no errno
_SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary path in the target's directory; on success move it onto ``path``.

    The temporary file keeps the target's suffix so that writers which dispatch on the
    extension (Open3D) still work. On any exception (KeyboardInterrupt included) the
    temporary file is removed and the target is left untouched.

    Example:
        >>> with atomic_output("out.npy") as tmp:   # doctest: +SKIP
        ...     np.save(tmp, array)
    """
    path = check_writable(path, overwrite=overwrite)  # removes stale temporary files too
    tmp = _make_temp(path, sweep=False)
    handed = False  # to the output group running now, which moves or removes it
    try:
        # mkstemp creates 0600 files; give the output the mode any other new file would get.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        try:
            yield tmp
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
        except OSError as err:  # disk full, a file size limit: name the output, not its temp
            if type(err) is OSError and _SHORT_WRITE.fullmatch(str(err)):  # numpy's tofile
                why = f"could not be written in full ({err}): is the disk full?"
                raise OSError(errno.EIO, why, str(path)) from err
            if err.errno in _WRITE_ERRNOS and err.filename in (None, str(tmp), tmp):
                raise OSError(err.errno, err.strerror or str(err), str(path)) from err
            raise
        if _GROUPS:
            _GROUPS[-1].append((tmp, path, overwrite))
            handed = True
            return
        _commit(tmp, path, overwrite)
    finally:
        if not handed:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def _commit(tmp: Path, path: Path, overwrite: bool, check: bool = True) -> None:
    """Move a finished temporary file onto its target (:func:`atomic_output`); ``check``:
    the target and a recorded signal are checked first (an output group checks them all
    before it moves any)."""
    if check:
        # Something may have appeared at the target while writing: same rules as before.
        try:
            _check_target(path, overwrite=overwrite)
        except OutputExistsError:
            raise OutputExistsError(path, "appeared while writing; not replaced") from None
        raise_if_signalled()  # a signal a library swallowed: nothing is written after it
    os.replace(tmp, path)
    with contextlib.suppress(OSError):  # directory fsync is best effort (not on all FS)
        dir_fd = os.open(_parent(path), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


#: the output groups running now (:func:`output_group`), innermost last: each holds the
#: finished temporary files of its outputs with their targets
_GROUPS: list[list[tuple[Path, Path, bool]]] = []
#: set while an output group moves its files: a signal is recorded, and raised after them
_MOVING: list[bool] = []


@contextlib.contextmanager
def output_group() -> Iterator[None]:
    """Within the block, each :func:`atomic_output` keeps its finished temporary file, and
    all of them are moved onto their targets when the block ends without an exception; on
    any exception (a signal included) none is, and every temporary file is removed. A
    command's outputs appear together or not at all: a SIGTERM while ``pcreg register`` drew
    its ``--render`` picture left ``--out`` written (1.9-3.0 s into the command) and the run
    exited 143. SIGTERM, SIGHUP and SIGINT are held back while the files are moved (blocked on this
    thread; one another thread takes is recorded by pcreg's handler) and end the run right
    after."""
    pending: list[tuple[Path, Path, bool]] = []
    _GROUPS.append(pending)
    try:
        yield
        _GROUPS.remove(pending)
        for _tmp, path, overwrite in pending:  # every target still free before any moves
            try:
                _check_target(path, overwrite=overwrite)
            except OutputExistsError:
                raise OutputExistsError(path, "appeared while writing; not replaced") from None
        raise_if_signalled()
        held = {signal.SIGTERM, signal.SIGHUP, signal.SIGINT}  # Ctrl-C between two moves
        # left an earlier map half-replaced: new poses beside the old map.ply (a hostile run)
        on_main = threading.current_thread() is threading.main_thread()
        if on_main:  # a default handler (a library caller's process) would kill mid-move
            signal.pthread_sigmask(signal.SIG_BLOCK, held)
        _MOVING.append(True)  # pcreg's handler, run for a signal another thread took, waits
        try:
            for tmp, path, overwrite in pending:
                _commit(tmp, path, overwrite, check=False)
        finally:
            _MOVING.pop()
            if on_main:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
        raise_if_signalled()  # a signal that arrived while they moved: the run ends now
    finally:
        if pending in _GROUPS:
            _GROUPS.remove(pending)
        for tmp, _, _ in pending:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


class Terminated(SystemExit):
    """Raised by :func:`signals_raise` when the process receives SIGTERM, SIGHUP or (where
    Python's own Ctrl-C handler was in place) SIGINT.

    A ``SystemExit`` whose code is ``128 + signum`` (143 for SIGTERM), so ``except
    Exception`` does not swallow it, ``finally`` blocks run, and an uncaught one exits the
    way a shell reports a process killed by that signal."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.signame = signal.Signals(signum).name
        super().__init__(128 + signum)

    def __str__(self) -> str:
        return "interrupted" if self.signum == signal.SIGINT else f"terminated by {self.signame}"


@contextlib.contextmanager
def quiet_native() -> Iterator[list[str]]:
    """Keep what native code prints off the terminal: file descriptors 1 and 2 go to a
    temporary file meanwhile (Open3D's PLY reader and writer, RPly, print there themselves,
    past Open3D's verbosity level: a map.ply cut short by a full disk printed 70-85 lines).
    Yields a list that receives the text afterwards."""
    printed: list[str] = []
    with tempfile.TemporaryFile() as sink:
        saved = []
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        for fd in (1, 2):
            try:
                saved.append((fd, os.dup(fd)))
                os.dup2(sink.fileno(), fd)
            except OSError:  # a closed descriptor: nothing to keep quiet
                continue
        try:
            yield printed
        finally:
            for fd, old in saved:
                os.dup2(old, fd)
                os.close(old)
            sink.seek(0)
            printed.append(sink.read().decode("utf-8", "replace"))


#: the signals that :func:`signals_raise` turned into :class:`Terminated`, latest last
_RECEIVED: list[int] = []
_ACTIVE: list[bool] = []  # one entry per signals_raise block running on the main thread
#: a duplicate of the process's standard error, kept when a signal silenced file descriptor 2
_QUIETED: list[int] = []


def _quiet_stderr() -> None:
    """Point file descriptor 2 at /dev/null, keeping a duplicate for :func:`write_stderr`:
    once a signal ends the run, the C++ code of the libraries still shutting down (Ray's core
    worker: "task_manager.cc: Failed to push error to driver", seen between SIGTERM and
    pcreg's own line in one of three full-suite runs of a SIGTERMed ``pcreg batch``) writes
    nothing to the user's terminal, and pcreg's one line is the only one."""
    if _QUIETED:
        return
    try:
        saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        os.dup2(devnull, 2)
    except OSError:
        os.close(saved)
        return
    finally:
        os.close(devnull)
    _QUIETED.append(saved)


def write_stderr(text: str) -> None:
    """Write ``text`` to the process's standard error, also after a signal silenced file
    descriptor 2 (:func:`signals_raise`); to ``sys.stderr`` where it is redirected (a request
    ``pcreg serve`` runs: a SIGTERM mid-request wrote the request's one line to the server's
    terminal, and its client exited 143 without a word)."""
    if sys.stderr is not None and sys.stderr is not sys.__stderr__:
        sys.stderr.write(text)
        return
    if _QUIETED:
        with contextlib.suppress(OSError):
            os.write(_QUIETED[0], text.encode("utf-8", "replace"))
        return
    if sys.stderr is not None:
        sys.stderr.write(text)


def received_signal() -> int | None:
    """The last signal :func:`signals_raise` turned into :class:`Terminated` (within its latest
    block on the main thread), or None. A library that catches the ``Terminated`` raised in its
    own wait and raises a ``SystemExit`` of its own instead (Ray's ``ray.wait`` and ``ray.get``
    turn it into ``SystemExit(1)``) loses the exit code; the caller finds the signal here."""
    return _RECEIVED[-1] if _RECEIVED else None


def raise_if_signalled() -> None:
    """Raise :class:`Terminated` again if a signal arrived within the :func:`signals_raise`
    block running now. A library may catch the first one and go on: an interrupted
    ``import open3d`` comes back as ImportError, which a fallback import path takes for a
    missing package (a SIGTERM about 0.55 s into ``pcreg register`` was lost that way, and
    the command finished, wrote its output and exited 0). Called before an output is
    committed (:func:`atomic_output`) and when the command returns."""
    if _ACTIVE and _RECEIVED:
        raise Terminated(_RECEIVED[-1])


def forget_signals() -> None:
    """Forget the signals :func:`signals_raise` recorded (:func:`received_signal` is None
    until the next one): a command line's entry point starts with none."""
    _RECEIVED.clear()


@contextlib.contextmanager
def signals_raise(quiet_stderr: bool = False) -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated` instead of killing the
    process at once, so ``finally`` blocks (temporary-file clean-up) run. SIGINT does too
    (exit code 130, "interrupted") instead of raising KeyboardInterrupt: recorded like the
    others, a Ctrl-C that a library swallowed ends the run all the same (one during
    ``import onnxruntime`` came back as "onnxruntime is not installed", and ``pcreg map``
    finished and exited 0), and an output group holds it back while its files move. ``quiet_stderr``
    (the ``pcreg`` command, which then exits): the signal also points file descriptor 2 at
    /dev/null for good (:func:`_quiet_stderr`; :func:`write_stderr` still reaches it).

    Only signals whose handler is the default one (for SIGINT, Python's) are taken over (a
    handler the embedding program installed is left alone), and the previous handlers are
    restored on exit. Off the main thread (where Python cannot install handlers) it does
    nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, object] = {}

    def _raise(signum: int, _frame: object) -> None:
        _RECEIVED.append(signum)
        if quiet_stderr:
            _quiet_stderr()
        if _MOVING:  # an output group's files are moving: raised once they all have
            return
        raise Terminated(signum)

    _RECEIVED.clear()
    _ACTIVE.append(True)
    try:
        for name in ("SIGTERM", "SIGHUP", "SIGINT"):
            signum = getattr(signal, name, None)
            default = signal.default_int_handler if name == "SIGINT" else signal.SIG_DFL
            if signum is not None and signal.getsignal(signum) is default:
                previous[signum] = signal.signal(signum, _raise)
        yield
    finally:
        _ACTIVE.pop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
