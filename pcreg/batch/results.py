"""``results.jsonl``: one line per finished pair, appended atomically, read back on resume.

Each line is written with a single ``write`` of the whole line on a file opened in append mode,
then flushed to disk (``fsync``): a crash of the writer (even ``SIGKILL``) leaves either the
whole line or, at worst, a partial last line without its newline, which :meth:`ResultsLog.open`
cuts off before appending. So every pair appears at most once, and a resumed run skips exactly
the pairs whose lines are complete.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from pathlib import Path

from pcreg.errors import CorruptFileError

__all__ = ["SUCCESS", "ResultsLog", "format_summary", "summarise"]

#: success under the published protocols (DESIGN §7, as ``pcreg evaluate`` scores them):
#: indoor RMSE <= 0.2 m (3DMatch registration recall), outdoor RRE < 5 deg and RTE < 2 m (KITTI)
SUCCESS = {"indoor": {"rmse_m": 0.2}, "outdoor": {"rre_deg": 5.0, "rte_m": 2.0}}


def is_success(row: dict) -> bool | None:
    """Whether a row with ground-truth errors meets its setting's criterion (None: no truth)."""
    if row.get("rre_deg") is None or row.get("status") != "ok":
        return None
    if row.get("setting") == "outdoor":
        limits = SUCCESS["outdoor"]
        return row["rre_deg"] < limits["rre_deg"] and row["rte_m"] < limits["rte_m"]
    return row["rmse_m"] <= SUCCESS["indoor"]["rmse_m"]


class ResultsLog:
    """The results file of a batch run, opened for appending (a context manager)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.rows: list[dict] = []
        self._fd: int | None = None

    def open(self) -> ResultsLog:
        """Read the complete lines already there (cutting off a partial last line) and open
        the file for appending."""
        if self.path.is_file():
            data = self.path.read_bytes()
            complete = data[: data.rfind(b"\n") + 1]
            for k, line in enumerate(complete.splitlines(), 1):
                try:
                    self.rows.append(json.loads(line))
                except json.JSONDecodeError:
                    raise CorruptFileError(self.path, f"line {k} is not JSON") from None
            if len(complete) < len(data):  # a line cut short by a crash: never finished
                with self.path.open("r+b") as f:
                    f.truncate(len(complete))
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self

    @property
    def done(self) -> set[str]:
        """Ids whose latest row registered without error: a resumed run skips these and
        tries the failed ones again (their new row then counts)."""
        return {i for i, row in self.latest().items() if row.get("status") == "ok"}

    def latest(self) -> dict[str, dict]:
        """The last row of each id, in first-appearance order."""
        out: dict[str, dict] = {}
        for row in self.rows:
            out[row["id"]] = row
        return out

    def append(self, row: dict) -> None:
        """One complete line, in one write, on disk before this returns."""
        if self._fd is None:
            raise RuntimeError("the results log is not open")
        line = (json.dumps(row, allow_nan=True) + "\n").encode()
        written = os.write(self._fd, line)
        if written != len(line):  # pragma: no cover - a regular file takes the whole line
            raise OSError(f"{self.path}: short write ({written} of {len(line)} bytes)")
        os.fsync(self._fd)
        self.rows.append(row)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ResultsLog:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(values) if values else None


def summarise(rows: list[dict], wall_s: float | None = None) -> dict:
    """Counts and medians of a run's rows: pairs, registered, failed, with ground truth the
    successes under :data:`SUCCESS` and median RRE / RTE over every scored pair (failures
    included, unlike ``pcreg evaluate``'s means over successes), median seconds per pair, the
    first failed pair's error, and ``wall_s``; a median of nothing is None."""
    ok = [r for r in rows if r.get("status") == "ok"]
    scored = [r for r in ok if is_success(r) is not None]
    out = {
        "pairs": len(rows),
        "ok": len(ok),
        "failed": len(rows) - len(ok),
        "registered": sum(bool(r.get("registered")) for r in ok),
        "with_gt": len(scored),
        "success": sum(bool(is_success(r)) for r in scored),
        "median_rre_deg": _median([r["rre_deg"] for r in scored]),
        "median_rte_m": _median([r["rte_m"] for r in scored]),
        "median_time_s": _median([r.get("time_s") for r in ok]),
        "first_error": next(  # "<id>: <error>" of the first failed pair, None if none failed
            (f"{r.get('id')}: {r.get('error')}" for r in rows if r.get("status") != "ok"), None
        ),
    }
    if wall_s is not None:
        out["wall_s"] = wall_s
    return out


def format_summary(summary: dict, new: int | None = None) -> str:
    """A short Markdown table of :func:`summarise`'s numbers (``new``: pairs run this time)."""
    rows = [
        ("pairs", f"{summary['pairs']}" + (f" ({new} this run)" if new is not None else "")),
        (
            "registered",
            f"{summary['registered']} of {summary['ok']}"
            if summary["ok"]
            else "none: no pair ran to a result",
        ),
        ("failed", f"{summary['failed']}"),
    ]
    if summary["with_gt"]:
        rows += [
            ("success vs gt", f"{summary['success']} of {summary['with_gt']}"),
            ("median RRE / RTE (all scored pairs)", f"{summary['median_rre_deg']:.3f} deg / "
             f"{100 * summary['median_rte_m']:.1f} cm"),
        ]  # fmt: skip
    if summary["median_time_s"] is not None:
        rows.append(("median time per pair", f"{summary['median_time_s']:.2f} s"))
    if summary.get("pairs_per_s") is not None:
        rows.append(("throughput", f"{summary['pairs_per_s']:.2f} pairs/s"))
    return "\n".join(["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])
