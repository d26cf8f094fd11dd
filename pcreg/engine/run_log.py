"""What a training run leaves behind besides checkpoints: the run record (resolved config, git
commit, environment), a CSV and a JSON-lines log of every logged value, TensorBoard events."""

from __future__ import annotations

import csv
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["MetricsLog", "write_run_record"]


def _git_commit() -> str | None:
    repo = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def write_run_record(
    out_dir: Path, config: dict[str, Any], extra: dict[str, Any] | None = None
) -> Path:
    """``<out_dir>/run.json``: the resolved config, git commit, versions, machine, command."""
    import torch

    from pcreg._fs import atomic_output

    record = {
        "config": config,
        "git_commit": _git_commit(),
        "command": sys.argv,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        **(extra or {}),
    }
    path = out_dir / "run.json"
    with atomic_output(path, overwrite=True) as tmp:
        tmp.write_text(json.dumps(record, indent=1, default=str))
    return path


class MetricsLog:
    """Append-only ``metrics.csv`` / ``metrics.jsonl`` and TensorBoard scalars in ``tb/``.

    Rows are ``{"step", "epoch", "split", <name>: value, ...}``; resuming appends (earlier rows
    beyond the resumed step are dropped so the log matches the resumed history)."""

    def __init__(self, out_dir: Path, resume_step: int | None = None) -> None:
        self.out_dir = out_dir
        self.jsonl = out_dir / "metrics.jsonl"
        if resume_step is not None and self.jsonl.exists():
            kept = [
                ln
                for ln in self.jsonl.read_text().splitlines()
                if ln and json.loads(ln)["step"] <= resume_step
            ]
            self.jsonl.write_text("".join(k + "\n" for k in kept))
        elif resume_step is None and self.jsonl.exists():
            self.jsonl.unlink()
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(out_dir / "tb"))
        except ImportError:  # tensorboard not installed: CSV/JSON only
            self.tb = None

    def log(self, step: int, epoch: int, split: str, values: dict[str, float]) -> None:
        row = {"step": step, "epoch": epoch, "split": split, **values}
        with open(self.jsonl, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
        if self.tb is not None:
            for k, v in values.items():
                self.tb.add_scalar(f"{split}/{k}", v, step)

    def rows(self) -> list[dict]:
        if not self.jsonl.exists():
            return []
        return [json.loads(ln) for ln in self.jsonl.read_text().splitlines() if ln]

    def write_csv(self) -> Path:
        rows = self.rows()
        keys = sorted(
            {k for r in rows for k in r}, key=lambda k: (k not in ("step", "epoch", "split"), k)
        )
        path = self.out_dir / "metrics.csv"
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=keys)
            writer.writeheader()
            writer.writerows(rows)
        return path

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
