"""A local Ray cluster that pcreg starts dies with the process that started it, even one
killed outright (SIGKILL, the OOM killer).

Ray's own fate sharing (``PR_SET_PDEATHSIG`` on the processes the driver starts: gcs_server,
the raylet, the log monitor) does not reach the raylet's children: its agents
(``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) see the raylet go, then publish that to
the dead GCS with a fixed 60 s timeout. Measured (Ray 2.60, 2-core EPYC): after a SIGKILL of
``pcreg batch`` both agents still ran 30 s later and were gone after about 60 s;
``RAY_gcs_rpc_server_reconnect_timeout_s=2`` did not shorten it (both still ran 17 s later),
and Ray has no setting that binds them to the driver.

So :class:`ClusterReaper` gives the cluster a temporary directory of its own (Ray's
``_temp_dir``: ``<RAY_TMPDIR, TMPDIR or /tmp>/ray/pcreg-<random>``, where the sessions, logs
and sockets of that cluster go) and starts a watchdog before the cluster: a small process (this
file, run by path, standard library only) that blocks reading a pipe whose write end only the
driver holds. When the pipe closes, however the driver ended, the watchdog terminates every
process that has a file open in that directory, which every process of the cluster has (its
logs; a worker its redirected stdout), SIGTERM then SIGKILL after a second, and exits. (An
environment variable would not do as the mark: Ray's Python processes overwrite
``/proc/PID/environ`` with their process titles.) A cluster given by address is never watched.
Linux only (it reads ``/proc``); elsewhere there is no watchdog and Ray's own clean-up applies.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time

__all__ = ["ClusterReaper", "cluster_processes", "reap"]

logger = logging.getLogger(__name__)

#: the longest cluster directory used: Ray's socket paths under it must stay within the
#: 107 bytes of a Unix socket address (``<dir>/session_<date>_<time>_<pid>/sockets/<name>``)
_MAX_DIR = 48


def cluster_processes(temp_dir: str, exclude: tuple[int, ...] = ()) -> list[int]:
    """Pids of this machine's processes with a file open under ``temp_dir`` (readable ones;
    this process and ``exclude`` left out)."""
    prefix = os.path.join(os.path.abspath(temp_dir), "")
    skip = {os.getpid(), *exclude}
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit() or int(name) in skip:
            continue
        try:
            fds = os.listdir(f"/proc/{name}/fd")
        except OSError:  # gone, or someone else's
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{name}/fd/{fd}")
            except OSError:
                continue
            if target.startswith(prefix):
                found.append(int(name))
                break
    return found


def reap(temp_dir: str, exclude: tuple[int, ...] = (), grace: float = 1.0) -> int:
    """Terminate the processes of the cluster in ``temp_dir``: SIGTERM, then SIGKILL for
    those still there after ``grace`` seconds. Returns how many there were."""
    pids = cluster_processes(temp_dir, exclude)
    found = len(pids)
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signum)
        deadline = time.monotonic() + grace
        while pids and time.monotonic() < deadline:
            time.sleep(0.05)
            pids = [p for p in pids if _running(p)]
        pids = cluster_processes(temp_dir, exclude)  # and any started meanwhile
        if not pids:
            break
    return found


def _running(pid: int) -> bool:
    """False for a process that is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


class ClusterReaper:
    """The watchdog of one local cluster (see the module docstring).

    Start it, start the cluster with ``_temp_dir=reaper.temp_dir``, and :meth:`close` it
    after the cluster is shut down (the watchdog then terminates whatever is left of it).
    :meth:`start` gives None where there is no watchdog (not Linux, a temporary directory
    too long for Ray's sockets).
    """

    def __init__(self, temp_dir: str) -> None:
        self.temp_dir = temp_dir
        # its own session: a Ctrl-C or a hang-up meant for pcreg does not stop it before it
        # cleans up; stdin is the pipe, stdout and stderr go nowhere
        self._proc = subprocess.Popen(
            [sys.executable, "-I", os.path.abspath(__file__), temp_dir, str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True,
        )  # fmt: skip

    @classmethod
    def start(cls) -> ClusterReaper | None:
        if not (sys.platform.startswith("linux") and os.path.isdir("/proc/self/fd")):
            return None
        if not sys.executable:  # an embedded interpreter: nothing to run the watchdog with
            return None
        root = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
        temp_dir = os.path.join(os.path.abspath(root), "ray", f"pcreg-{secrets.token_hex(8)}")
        if len(temp_dir) > _MAX_DIR:
            logger.debug("no watchdog for the Ray cluster: %s is too long a directory", temp_dir)
            return None
        try:
            return cls(temp_dir)
        except OSError as err:  # no process to spare: Ray's own clean-up alone
            logger.debug("no watchdog for the Ray cluster: %s", err)
            return None

    def close(self, timeout: float = 10.0) -> None:
        """Close the pipe: the watchdog terminates what is left of the cluster and exits
        (waited for up to ``timeout`` seconds)."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout)


def _watch(temp_dir: str, driver: int) -> None:
    """The watchdog: wait for the end of the driver's pipe on stdin, then reap, and remove
    the cluster's directory (its sessions, logs and spilled objects: one per run would
    otherwise pile up under /tmp/ray) once no process has a file open in it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            if not os.read(0, 4096):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    reap(temp_dir, exclude=(driver,))
    if not cluster_processes(temp_dir, exclude=(driver,)):
        shutil.rmtree(temp_dir, ignore_errors=True)


if __name__ == "__main__":
    _watch(sys.argv[1], int(sys.argv[2]))
