"""Checkpoints: a write cut short names the checkpoint and keeps the one before."""

from __future__ import annotations

import errno
import subprocess
import sys

import torch

from pcreg.engine.checkpoint import load_checkpoint, save_checkpoint


def test_a_checkpoint_cut_short_names_itself_and_keeps_the_old_one(tmp_path):
    """``torch.save`` past ``ulimit -f`` raises a RuntimeError from its zip writer ("unexpected
    pos 704 vs 598") that names no file; it becomes an OSError naming the checkpoint, and the
    previous checkpoint stays whole. In a child process: the limit holds for the whole
    process."""
    target = tmp_path / "last.pt"
    save_checkpoint(target, "test", {"w": torch.ones(3)})
    code = """
import resource, signal, sys
import torch
from pcreg.engine.checkpoint import save_checkpoint
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
try:
    save_checkpoint(sys.argv[1], "test", {"w": torch.zeros(1_000_000)})
except OSError as err:
    print(err.errno, err.filename, err.strerror, sep="|")
"""
    done = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True,
                          text=True, timeout=120, check=True)  # fmt: skip
    code_, name, why = done.stdout.strip().split("|")
    assert (int(code_), name) == (errno.EIO, str(target)), done
    assert "is the disk full?" in why, why
    assert torch.equal(load_checkpoint(target, "test")["model"]["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temporary file left


def test_other_errors_of_torch_save_pass_through(tmp_path, monkeypatch):
    """Only the zip writer's errors are a full disk: another RuntimeError of torch.save
    passes through as it is, and nothing is left behind."""
    import pytest

    def fails(*args, **kwargs):
        raise RuntimeError("something else went wrong")

    monkeypatch.setattr(torch, "save", fails)
    with pytest.raises(RuntimeError, match=r"^something else went wrong$"):
        save_checkpoint(tmp_path / "x.pt", "test", {"w": torch.ones(1)})
    assert list(tmp_path.iterdir()) == []
