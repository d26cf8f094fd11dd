"""KeOps symbolic (lazy) tensors: the distance matrix is never stored, reductions run in a
JIT-compiled kernel (CUDA when the tensors are on a GPU, C++ on CPU). Each new formula (e.g. a
new ``k``) compiles once, about 5-15 s, into the KeOps cache folder (``KEOPS_CACHE_FOLDER``)."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import torch
from torch import Tensor

from pcreg._fs import atomic_output
from pcreg.errors import InputError

NAME = "keops"

INSTALL_HINT = "pip install pykeops (needs a C++ compiler; nvcc for CUDA)"


def is_available() -> bool:
    return importlib.util.find_spec("pykeops") is not None


def _lazy(q: Tensor, s: Tensor):
    try:
        import pykeops
        from pykeops.torch import LazyTensor
    except ImportError as exc:
        raise ImportError(f"the keops neighbor backend needs pykeops: {INSTALL_HINT}") from exc
    pykeops.set_verbose(False)  # KeOps prints compile chatter to stdout otherwise
    # Centre on the support so that coordinates stay small (precision far from the origin).
    center = s.mean(dim=0, keepdim=True)
    x_i = LazyTensor((q - center).contiguous()[:, None, :])  # (m, 1, 3)
    y_j = LazyTensor((s - center).contiguous()[None, :, :])  # (1, n, 3)
    return ((x_i - y_j) ** 2).sum(-1)  # (m, n) symbolic squared distances


def knn(q: Tensor, s: Tensor, k: int) -> tuple[Tensor, Tensor | None, bool]:
    d2 = _lazy(q, s)
    kk = min(k, s.shape[0])
    idx = d2.argKmin(kk, dim=1).reshape(q.shape[0], kk)
    return idx.long(), None, False


def radius(
    q: Tensor, s: Tensor, radius: float, cap: int | None
) -> tuple[Tensor, Tensor | None, bool]:
    d2 = _lazy(q, s)
    if cap is None:
        # Count the neighbors inside the radius in one reduction: step(r^2 - d^2) is 1 inside.
        inside = (radius * radius - d2).step()
        cap = int(inside.sum(dim=1).max())
        if cap == 0:
            return torch.full((q.shape[0], 0), -1, dtype=torch.long, device=q.device), None, True
    kk = min(cap, s.shape[0])
    idx = d2.argKmin(kk, dim=1).reshape(q.shape[0], kk)
    return idx.long(), None, False


# -- does KeOps run on this GPU? ------------------------------------------------------------

#: the probe: KeOps's k nearest neighbors of random points on the GPU against torch's exact
#: ones. A broken KeOps / CUDA pairing does not raise: it kills the process (pykeops 2.3 with
#: CUDA 13.0 on an H200, torch 2.11: a segmentation fault in its NVRTC compile, seen
#: 2026-11-26; upstream reports of the kind: getkeops/keops#398), hence a child process.
PROBE = """
import torch
from pcreg.ops.neighbors import _keops
q = torch.rand(300, 3, device="cuda")
s = torch.rand(500, 3, device="cuda")
idx, _, _ = _keops.knn(q, s, 4)
exact = torch.cdist(q, s).topk(4, largest=False).indices
assert (idx.sort(1).values == exact.sort(1).values).float().mean() > 0.99
"""
#: the first run compiles KeOps's engine and the formula (tens of seconds); later ones reuse
#: its cache
PROBE_TIMEOUT_S = 600.0

_VERDICTS: dict[str, tuple[bool, str]] = {}


def _probe_key() -> str:
    import pykeops

    gpu = torch.cuda.get_device_name(torch.cuda.current_device())
    versions = f"pykeops {pykeops.__version__} | torch {torch.__version__}"
    return f"{versions} | CUDA {torch.version.cuda} | {gpu}"


def _cache_file() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "pcreg" / "keops-cuda-probe.json"


def cuda_verdict(timeout_s: float = PROBE_TIMEOUT_S) -> tuple[bool, str]:
    """Whether KeOps runs on this process's CUDA device: ``(True, "")``, or ``(False, why)``.

    Decided once per pykeops / torch / CUDA / GPU combination by :data:`PROBE` in a child
    process, and remembered in ``~/.cache/pcreg/keops-cuda-probe.json`` (and in this process)."""
    if not is_available():
        return False, "pykeops is not installed"
    if not torch.cuda.is_available():
        return False, "no CUDA device"
    key = _probe_key()
    if key in _VERDICTS:
        return _VERDICTS[key]
    path = _cache_file()
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if isinstance(known.get(key), dict):
        _VERDICTS[key] = (bool(known[key].get("ok")), str(known[key].get("why", "")))
        return _VERDICTS[key]
    logging.getLogger(__name__).info("checking that KeOps runs on %s (once)", key)
    here = str(Path(__file__).resolve().parents[3])  # the child imports this pcreg
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])),
    }
    try:
        run = subprocess.run(
            [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=timeout_s,
            env=env,
        )  # fmt: skip
        if run.returncode == 0:  # the probe ran KeOps and its neighbors were torch's
            verdict = (True, "")
        elif run.returncode < 0:
            verdict = (False, f"its check crashed ({_signal_name(-run.returncode)})")
        else:
            lines = (run.stderr or run.stdout).strip().splitlines()
            verdict = (False, f"its check failed: {lines[-1] if lines else run.returncode}")
    except subprocess.TimeoutExpired:
        verdict = (False, f"its check took over {timeout_s:.0f} s")
    _VERDICTS[key] = verdict
    known[key] = {"ok": verdict[0], "why": verdict[1]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(path, overwrite=True) as tmp:
            tmp.write_text(json.dumps(known, indent=1))
    except (OSError, InputError):  # a read-only home: the verdict holds for this process only
        pass
    return verdict


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
