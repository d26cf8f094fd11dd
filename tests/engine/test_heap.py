"""Freed memory kept in the heap (glibc): a freed large tensor's pages stay resident and are
reused, and release_memory hands them back."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pcreg.engine import heap

pytestmark = pytest.mark.skipif(heap._glibc() is None, reason="needs glibc's malloc")

_PROBE = """
import sys, torch
from pcreg.engine import heap
def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
on = heap.retain_freed_memory()
before = rss_mib()
x = torch.ones(50 * 2**20 // 4)  # 50 MiB, above glibc's largest mmap threshold
del x
freed = rss_mib()
heap.release_memory()
print(on, round(freed - before, 1), round(rss_mib() - before, 1))
"""


def _probe(env: dict) -> tuple[bool, float, float]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, check=True
    ).stdout.split()
    return out[0] == "True", float(out[1]), float(out[2])


def test_freed_memory_stays_until_released():
    env = {k: v for k, v in os.environ.items() if k != heap.ENV_VAR}
    on, after_free, after_release = _probe(env)
    assert on
    assert after_free > 40  # the 50 MiB stayed resident for reuse
    assert after_release < 10  # and went back on request
    # opted out: malloc's own behaviour, the mapping goes back at once
    on, after_free, _ = _probe({**env, heap.ENV_VAR: "0"})
    assert not on
    assert after_free < 10


def test_building_a_model_leaves_the_allocator_alone(tiny_checkpoint, monkeypatch):
    """The process-wide malloc setting is the command line's opt-in, not a side effect of
    loading a network (tests/test_cli.py checks that ``pcreg`` turns it on)."""
    from pcreg.registration.loading import load_network

    monkeypatch.delenv(heap.ENV_VAR, raising=False)
    monkeypatch.setattr(heap, "_active", False)
    load_network(tiny_checkpoint)
    assert not heap._active


def test_peak_rss_is_this_process_high_water_mark():
    with open("/proc/self/statm") as f:
        now = int(f.read().split()[1]) * 4096 / 2**20
    peak = heap.peak_rss_mib()
    assert peak is not None and peak >= now * 0.99
    assert heap.peak_rss_mib(2**31 - 1) is None  # no such process
