"""Running one hostile ``pcreg`` invocation and judging it against the exit-code contract.

The contract (README "Exit codes", docs/cli.md, the "never silently wrong" issue):

* exit 0: success; a ``register`` (or ``odometry`` / ``batch``) with a known ground truth must
  come with a correct transform, judged after mapping any change made to the inputs back;
* exit 2: bad input; stderr is exactly one line ``pcreg: error: ...`` naming the file or the
  argument (no traceback, no third-party lines, no ANSI colour codes);
* exit 3: valid input that did not register; one line ``pcreg: SRC -> REF: not registered: ...``
  and no ``--out`` / ``--render`` written;
* never exit 1, never a traceback, never a hang, never more than 4 GiB peak RSS.

Each child runs in its own session with stdout / stderr sent to files; it is reaped with
``os.wait4`` so that its peak resident memory (``ru_maxrss``, KiB) is measured. A forked
child's ``ru_maxrss`` starts at its parent's resident size (Linux keeps the high-water mark
across ``exec``), so pcreg is started by a tiny launcher (``python -S``, a few MB) that forks,
execs pcreg, reaps it with ``os.wait4`` and writes its status and ``ru_maxrss`` to a file: the
figure is pcreg's own, not the test process's.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: seconds a case may run before it counts as a hang
TIMEOUT_S = 180.0
#: the most resident memory a case may use (KiB, as ``ru_maxrss`` reports it)
MAX_RSS_KIB = 4 * 1024 * 1024

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: stderr lines pcreg itself writes on success: its logging format (warnings) or its prefix
OWN_LINE = re.compile(r"^(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) pcreg[\w.]*: |pcreg: )")
#: a tqdm progress bar (pcreg's own, for odometry / batch)
PROGRESS_LINE = re.compile(r"\d+%\|.*\|")
#: argparse's own errors: a usage block, then ``pcreg[ subcommand]: error: ...``
ARGPARSE_LAST = re.compile(r"^pcreg(?: [\w-]+)*: error: \S")
#: words that give away a third-party library talking on stderr
THIRD_PARTY = ("[Open3D", "RPly", "laspy", "torch", "Warning", "raylet", "Ray ", "gcs_", "hydra")

CATEGORIES = {
    "exit-1": "exit 1 (internal error)",
    "traceback": "Python traceback on stderr",
    "stderr-format": "stderr not exactly one well-formed line (exit 2 / 3)",
    "stderr-naming": "error line does not name the file / argument",
    "stderr-noise": "third-party lines or ANSI codes on stderr",
    "wrong-exit-0": "exit 0 with a wrong (or no possible) answer",
    "unexpected-exit": "exit code outside the expected set",
    "hang": "did not finish within the timeout",
    "memory": "peak RSS above 4 GiB",
    "output-written": "outputs written / files changed although the command failed",
    "bad-output": "exit 0 with missing or unreadable output",
}


@dataclass
class Invocation:
    """One command line and what the contract allows for it.

    ``gt`` is T_ref_src of the original (unchanged) data; the inputs were changed by the 4x4
    maps ``a_src`` / ``a_ref`` (``src' = a_src @ src``), so an estimate ``T'`` maps back to
    ``inv(a_ref) @ T' @ a_src``."""

    argv: list[str | bytes]
    allowed: frozenset[int]
    names: tuple[str, ...] = ()  # the error line names one of these (exit 2)
    words: tuple[str, ...] = ()  # ... and contains each of these (exit 2)
    gt: np.ndarray | None = None
    a_src: np.ndarray | None = None
    a_ref: np.ndarray | None = None
    rre_max: float = 5.0
    rte_max: float = 0.3
    kind: str = "register"  # register | odometry | view | batch | other
    relative_gt: dict[int, np.ndarray] = field(default_factory=dict)  # odometry: k -> T
    no_answer: bool = False  # no transform can be right: exit 0 is wrong
    argparse: bool = False  # exit 2 may be argparse's usage + error lines
    outputs: tuple[Path, ...] = ()  # --out / --render: written only on exit 0
    expect_outputs: tuple[Path, ...] = ()  # must exist after exit 0
    guarded: tuple[Path, ...] = ()  # must be unchanged after the run (any exit code)
    guarded_on_failure: tuple[Path, ...] = ()  # must be unchanged after a non-zero exit
    forbid_created: tuple[Path, ...] = ()  # must not exist after the run
    stdout: str = "pipe"  # pipe | closed | full
    stderr_checked: bool = True
    max_wall_s: float | None = None
    batch_dir: Path | None = None  # batch: results.jsonl rows checked against gt
    cwd: Path | None = None
    env: dict[str, str] = field(default_factory=dict)

    def command(self) -> list[str | bytes]:
        return [sys.executable, "-m", "pcreg", *self.argv]

    def shown(self) -> str:
        """The command line as a user would type it (for messages)."""
        import shlex

        parts = [os.fsdecode(a) if isinstance(a, bytes) else a for a in ["pcreg", *self.argv]]
        text = " ".join(shlex.quote(p) for p in parts)
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        if self.stdout == "closed":
            text += " >&-"
        elif self.stdout == "full":
            text += " >/dev/full"
        return text


@dataclass
class Outcome:
    rc: int | None  # None: timed out
    stdout: str
    stderr: str
    wall_s: float
    maxrss_kib: int


def _snapshot(path: Path) -> tuple | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if os.path.islink(path):
        return ("link", os.readlink(path))
    if path.is_file():
        return ("file", path.read_bytes())
    return ("other", st.st_mode)


#: fork + exec argv[2:], reap it with wait4, write "<waitstatus> <ru_maxrss KiB>" to argv[1]
_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execv(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write("%d %d" % (status, usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def run(inv: Invocation, workdir: Path, timeout: float = TIMEOUT_S) -> Outcome:
    """Run ``inv`` in ``workdir`` (its cwd), reaping the child with ``os.wait4``."""
    out_path, err_path = workdir / ".harness.stdout", workdir / ".harness.stderr"
    env = dict(os.environ)
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "PYTEST_CURRENT_TEST", "PYTEST_ADDOPTS"):
        env.pop(var, None)
    env.update(inv.env)
    usage_path = workdir / ".harness.usage"
    usage_path.unlink(missing_ok=True)
    cmd = [sys.executable, "-S", "-c", _LAUNCHER, str(usage_path), *inv.command()]
    with open(out_path, "wb") as out_f, open(err_path, "wb") as err_f:
        if inv.stdout == "closed":
            # as a shell user would: `pcreg ... >&-` (exec keeps the pid: wait4 measures it)
            cmd = ["bash", "-c", 'exec "$@" >&-', "bash", *cmd]
            stdout = out_f
        elif inv.stdout == "full":
            stdout = open("/dev/full", "wb")  # noqa: SIM115 (closed below)
        else:
            stdout = out_f
        start = time.monotonic()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=err_f,
            cwd=inv.cwd or workdir,
            env=env,
            start_new_session=True,
        )
        if stdout is not out_f:
            stdout.close()
        rc, rusage = None, None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                rc, rusage = os.waitstatus_to_exitcode(status), usage
                break
            if time.monotonic() - start > timeout:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                _, _, rusage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        wall = time.monotonic() - start
        proc.returncode = rc if rc is not None else -9  # reaped here, not by Popen
        if rc is not None:  # a child that left its own children behind (Ray): end them too
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
    maxrss = int(rusage.ru_maxrss) if rusage is not None else 0  # the launcher's (upper bound)
    if rc is not None and usage_path.is_file():  # pcreg's own status and peak
        status, maxrss = (int(v) for v in usage_path.read_text().split())
        rc = os.waitstatus_to_exitcode(status)
    return Outcome(
        rc=rc,
        stdout=out_path.read_bytes().decode("utf-8", "backslashreplace"),
        stderr=err_path.read_bytes().decode("utf-8", "backslashreplace"),
        wall_s=wall,
        maxrss_kib=maxrss,
    )


# ---- judging ------------------------------------------------------------------------------


def rre_rte(est: np.ndarray, gt: np.ndarray) -> tuple[float, float]:
    rot = gt[:3, :3].T @ est[:3, :3]
    cos = np.clip((np.trace(rot) - 1.0) / 2.0, -1.0, 1.0)
    return float(np.degrees(np.arccos(cos))), float(np.linalg.norm(est[:3, 3] - gt[:3, 3]))


def _reject_constant(name: str):
    raise ValueError(f"non-standard JSON constant {name}")


def strict_json(text: str):
    return json.loads(text, parse_constant=_reject_constant)


def _as_transform(value) -> np.ndarray | None:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if arr.shape == (3, 4):
        arr = np.vstack([arr, [0, 0, 0, 1]])
    return arr if arr.shape == (4, 4) else None


def judge_transform(
    est: np.ndarray | None, gt: np.ndarray, inv: Invocation, what: str = "transform"
) -> str | None:
    """None when ``est`` (in the invocation's frame) maps back onto ``gt``, else why not."""
    if est is None:
        return f"{what}: no 4x4 transform in the output"
    if not np.isfinite(est).all():
        return f"{what}: not finite: {est.tolist()}"
    rot = est[:3, :3]
    if np.abs(rot.T @ rot - np.eye(3)).max() > 1e-3 or abs(np.linalg.det(rot) - 1) > 1e-3:
        return f"{what}: not a rigid motion: {est.tolist()}"
    a_src = np.eye(4) if inv.a_src is None else inv.a_src
    a_ref = np.eye(4) if inv.a_ref is None else inv.a_ref
    back = np.linalg.inv(a_ref) @ est @ a_src
    rre, rte = rre_rte(back, gt)
    if not (rre < inv.rre_max and rte < inv.rte_max):
        return (
            f"{what}: RRE {rre:.3f} deg, RTE {rte:.4f} m after mapping back "
            f"(limits {inv.rre_max} deg, {inv.rte_max} m)"
        )
    return None


def _human_transform(stdout: str) -> np.ndarray | None:
    lines = stdout.splitlines()
    for k, line in enumerate(lines):
        if line.strip() == "T_ref_src =":
            try:
                return np.array([[float(v) for v in row.split()] for row in lines[k + 1 : k + 5]])
            except ValueError:
                return None
    return None


def _read_transform_file(path: Path) -> np.ndarray | None:
    try:
        if path.suffix == ".npy":
            return _as_transform(np.load(path, allow_pickle=False))
        if path.suffix == ".json":
            obj = strict_json(path.read_text())
            return _as_transform(obj["transform"] if isinstance(obj, dict) else obj)
        return _as_transform(np.loadtxt(path))
    except Exception:
        return None


def _flag(argv: list[str | bytes], name: str) -> str | bytes | None:
    for k, a in enumerate(argv[:-1]):
        if a == name:
            return argv[k + 1]
    return None


def judge(inv: Invocation, res: Outcome, before: dict[Path, tuple | None]) -> list[tuple[str, str]]:
    """The contract's violations, as ``(category, message)`` pairs (empty: the case passes)."""
    problems: list[tuple[str, str]] = []

    def add(cat: str, msg: str) -> None:
        problems.append((cat, msg))

    rc, err = res.rc, res.stderr
    lines = [ln for ln in err.splitlines()]
    if rc is None:
        add("hang", f"no exit after {res.wall_s:.0f} s")
    if res.maxrss_kib > MAX_RSS_KIB:
        add("memory", f"peak RSS {res.maxrss_kib / 1024 / 1024:.2f} GiB")
    if inv.max_wall_s is not None and rc is not None and res.wall_s > inv.max_wall_s:
        add("hang", f"took {res.wall_s:.1f} s, more than the {inv.max_wall_s:.0f} s allowed")
    if "Traceback (most recent call last)" in err:
        add("traceback", "a Python traceback on stderr")
    if inv.stderr_checked and ANSI.search(err):
        add("stderr-noise", "ANSI escape codes on stderr")
    if rc is not None:
        if rc == 1:
            add("exit-1", "exit 1 (internal error)")
        elif rc not in inv.allowed:
            add("unexpected-exit", f"exit {rc}, expected one of {sorted(inv.allowed)}")
    if rc == 2 and inv.stderr_checked:
        _judge_error_lines(inv, lines, add)
    if rc == 3 and inv.stderr_checked and not _one_not_registered_line(lines):
        add("stderr-format", "exit 3 needs one line 'pcreg: SRC -> REF: not registered: REASON'")
    if rc == 4 and inv.stderr_checked:
        if not _one_pairs_failed_line(lines):
            add("stderr-format", "exit 4 needs one line 'pcreg: MANIFEST: N of M pairs failed, "
                "the first ID: ERROR (...)'")  # fmt: skip
        elif inv.names and not any(n in lines[0] for n in inv.names):
            add("stderr-naming", f"the failed-pairs line names none of {list(inv.names)}")
    if rc is not None and rc != 0:
        for path in inv.outputs:
            if before.get(path) is None and _snapshot(path) is not None:
                add("output-written", f"{path.name} exists after exit {rc}")
        for path in inv.guarded_on_failure:
            if _snapshot(path) != before.get(path):
                add("output-written", f"{path.name} changed although the command failed")
    for path in inv.guarded:
        if _snapshot(path) != before.get(path):
            add("output-written", f"{path} changed (it must never be written)")
    for path in inv.forbid_created:
        if os.path.lexists(path):
            add("output-written", f"{path} was created")
    if rc == 0:
        _judge_success(inv, res, lines, add)
    return problems


def _one_not_registered_line(lines: list[str]) -> bool:
    return (
        len(lines) == 1 and re.match(r"^pcreg: .+ -> .+: not registered: \S", lines[0]) is not None
    )


def _one_pairs_failed_line(lines: list[str]) -> bool:
    pattern = r"^pcreg: .+: \d+ of \d+ pairs failed, the first \S"
    return len(lines) == 1 and re.match(pattern, lines[0]) is not None


def _judge_error_lines(inv: Invocation, lines: list[str], add) -> None:
    if inv.argparse and len(lines) >= 1 and ARGPARSE_LAST.match(lines[-1]):
        if len(lines) > 1 and not lines[0].startswith("usage: "):
            add("stderr-format", "argparse error without its usage line")
        line = lines[-1]
    else:
        if len(lines) != 1:
            add("stderr-format", f"exit 2 with {len(lines)} stderr lines, expected exactly 1")
        own = [ln for ln in lines if ln.startswith("pcreg: error: ")]
        if not own or len(own[-1]) <= len("pcreg: error: "):
            add("stderr-format", "no line starting 'pcreg: error: ' with a message")
            return
        line = own[-1]
        for other in lines:
            if other is not line and any(w in other for w in THIRD_PARTY):
                add("stderr-noise", f"third-party line: {other[:120]!r}")
                break
    if inv.names and not any(n in line for n in inv.names):
        add("stderr-naming", f"the error line names none of {list(inv.names)}")
    for word in inv.words:
        if word not in line:
            add("stderr-naming", f"the error line lacks {word!r}")


def _judge_success(inv: Invocation, res: Outcome, lines: list[str], add) -> None:
    if inv.stderr_checked:
        noise = [ln for ln in lines if not (OWN_LINE.match(ln) or PROGRESS_LINE.search(ln))]
        noise = [ln for ln in noise if ln.strip()]
        if noise:
            add("stderr-noise", f"{len(noise)} foreign stderr line(s), first: {noise[0][:160]!r}")
    if inv.no_answer:
        add("wrong-exit-0", "exit 0 although no transform can be right for these inputs")
    for path in inv.expect_outputs:
        if not path.is_file() or path.stat().st_size == 0:
            add("bad-output", f"{path.name} missing after exit 0")
        elif path.suffix == ".png" and path.read_bytes()[:4] != b"\x89PNG":
            add("bad-output", f"{path.name} is not a PNG")
    want_json = "--json" in inv.argv
    record = None
    if want_json and inv.stdout == "pipe":
        try:
            record = strict_json(res.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError) as exc:
            add("bad-output", f"--json output is not one strict JSON object ({exc})")
    if inv.kind == "register":
        if record is not None and record.get("registered") is not True:
            add("wrong-exit-0", f"exit 0 but registered={record.get('registered')!r}")
        if inv.gt is None or inv.stdout != "pipe":
            return
        est = (
            _as_transform(record.get("transform"))
            if record is not None
            else _human_transform(res.stdout)
        )
        if record is None and want_json:
            return
        why = judge_transform(est, inv.gt, inv)
        if why:
            add("wrong-exit-0", why)
        out = _flag(inv.argv, "--out")
        if isinstance(out, str) and est is not None:
            path = Path(out) if os.path.isabs(out) else (inv.cwd or Path(".")) / out
            saved = _read_transform_file(path)
            if saved is None or not np.allclose(saved, est, atol=1e-6):
                add("wrong-exit-0", f"--out {path.name} does not hold the printed transform")
    elif inv.kind == "odometry" and inv.relative_gt and record is not None:
        rel = record.get("relative") or []
        for k, gt in inv.relative_gt.items():
            est = _as_transform(rel[k]) if k < len(rel) else None
            why = judge_transform(est, gt, inv, what=f"relative[{k}]")
            if why:
                add("wrong-exit-0", why)
    elif inv.kind == "batch" and inv.batch_dir is not None and inv.gt is not None:
        rows = []
        try:
            for line in (inv.batch_dir / "results.jsonl").read_text().splitlines():
                rows.append(strict_json(line))
        except (OSError, ValueError) as exc:
            add("bad-output", f"results.jsonl unreadable ({exc})")
        for row in rows:
            if row.get("registered") is True or row.get("status") == "ok":
                why = judge_transform(_as_transform(row.get("transform")), inv.gt, inv)
                if why:
                    add("wrong-exit-0", f"batch row {row.get('id')}: {why}")


def snapshot_all(inv: Invocation) -> dict[Path, tuple | None]:
    paths = {*inv.outputs, *inv.guarded, *inv.guarded_on_failure}
    return {p: _snapshot(p) for p in paths}


def describe(inv: Invocation, res: Outcome, problems: list[tuple[str, str]]) -> str:
    """The failure message: the command line, the exit code, stderr and the violations."""
    rc = "timeout" if res.rc is None else res.rc
    tail = res.stderr if len(res.stderr) < 3000 else "..." + res.stderr[-3000:]
    parts = [
        f"$ {inv.shown()}",
        f"exit {rc} after {res.wall_s:.1f} s, peak RSS {res.maxrss_kib / 1024:.0f} MiB",
        *(f"  [{cat}] {msg}" for cat, msg in problems),
        "stderr:",
        tail.rstrip() or "(empty)",
    ]
    return "\n".join(parts)
