"""Timing helpers and the BENCHMARKS.md section writer."""

from __future__ import annotations

import os
import platform
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from pcreg._fs import atomic_output

__all__ = ["machine_description", "median_time", "replace_section"]


def median_time(
    fn: Callable[[], object], runs: int = 5, warmup: int = 1
) -> tuple[float, list[float]]:
    """Median wall time of ``fn()`` in seconds over ``runs`` timed calls after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def machine_description() -> str:
    """One line: CPU model, cores, memory, Python/torch/open3d/onnxruntime versions, and which
    runtime runs the shipped networks."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        mem = f", {pages / 2**30:.0f} GiB RAM"
    except (ValueError, OSError):
        pass
    import torch

    parts = [
        f"{cpu}, {os.cpu_count()} cores{mem}",
        f"Python {platform.python_version()}",
        f"torch {torch.__version__} ({torch.get_num_threads()} threads)",
    ]
    try:
        import open3d

        parts.append(f"open3d {open3d.__version__}")
    except ImportError:
        pass
    try:
        import pykeops

        parts.append(f"pykeops {pykeops.__version__}")
    except ImportError:
        pass
    try:
        import onnxruntime

        from pcreg.registration.onnx_loading import runtime_choice

        parts.append(
            f"onnxruntime {onnxruntime.__version__} (shipped networks on "
            f"{'torch' if runtime_choice() == 'torch' else 'ONNX Runtime'})"
        )
    except ImportError:
        pass
    return "; ".join(parts)


def replace_section(path: str | os.PathLike[str], name: str, body: str) -> Path:
    """Replace (or append) the block between ``<!-- BEGIN name -->`` and ``<!-- END name -->``
    in a Markdown file, atomically. Other sections are left untouched."""
    path = Path(path)
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    text = (
        pattern.sub(lambda _: block, text)
        if pattern.search(text)
        else text.rstrip() + "\n\n" + block + "\n"
    )
    with atomic_output(path, overwrite=True) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path
