"""Shared fixtures: seeded generators, the shared-data locator, markers."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from shared_paths import SHARED_DATA  # tests/ is on sys.path (a rootdir conftest)

# a `pcreg serve` the developer left running must not answer the tests' commands (their own
# code may differ); tests/test_serve.py starts its own server on its own socket
os.environ["PCREG_NO_SERVER"] = "1"
# the shipped networks' ONNX Runtime exports (pcreg.registration.onnx_loading) go to a cache of
# this session: a home folder that cannot be written does not matter, and the tests never write
# into the developer's ~/.cache; subprocesses inherit it. It starts as a copy of the user cache's
# exports of the shipped weights (the ones `make setup` makes), which the loader uses only where
# their manifest names this code and this onnxruntime, and else exports again: a fresh machine's
# `make test` then exports each network once, not twice (45-100 s on a 2-core machine).
if "PCREG_CACHE_DIR" not in os.environ:
    import atexit
    import shutil

    from pcreg.registration.onnx_loading import export_folder

    _CACHE = tempfile.mkdtemp(prefix="pcreg-test-cache-")
    for _model in ("indoor", "outdoor"):
        _made = export_folder(_model)[0]  # in the user's cache: PCREG_CACHE_DIR is not set yet
        try:
            if (_made / "manifest.json").is_file():
                shutil.copytree(_made, Path(_CACHE) / "onnx" / _made.name)
        except OSError:  # moved aside by an export running now, say: this session makes its own
            shutil.rmtree(Path(_CACHE) / "onnx" / _made.name, ignore_errors=True)
    os.environ["PCREG_CACHE_DIR"] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, True)


#: held while this test process runs local Ray clusters (see :func:`_ray_turn`)
_RAY_LOCK = Path(tempfile.gettempdir()) / "pcreg-tests-ray.lock"
_RAY_HELD = [0]


@contextlib.contextmanager
def _ray_turn():
    """This process's turn to start Ray clusters: one test process at a time on the machine
    (``make test`` runs two pytest-xdist workers, and two local clusters side by side can
    collide on Ray's fixed default ports, e.g. its dashboard agent's 52365). A lock file
    (``flock``: released when the process dies); nested turns in one process share it."""
    if _RAY_HELD[0]:
        _RAY_HELD[0] += 1
        try:
            yield
        finally:
            _RAY_HELD[0] -= 1
        return
    import fcntl

    with open(_RAY_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        _RAY_HELD[0] = 1
        try:
            yield
        finally:
            _RAY_HELD[0] = 0


@pytest.fixture(scope="module", autouse=True)
def _ray_module_turn(request):
    """A module marked ``ray`` as a whole holds the turn from its first fixture (a module
    fixture may start the cluster) to its last test."""
    marks = getattr(request.module, "pytestmark", [])
    marks = marks if isinstance(marks, list) else [marks]
    if any(mark.name == "ray" for mark in marks):
        with _ray_turn():
            yield
    else:
        yield


@pytest.fixture(autouse=True)
def _ray_test_turn(request):
    """A test marked ``ray`` holds the turn while it runs."""
    if request.node.get_closest_marker("ray") is None:
        yield
    else:
        with _ray_turn():
            yield


@pytest.fixture(scope="session", autouse=True)
def _onnx_exports():
    """The shipped networks exported into the session's cache before any test runs, so that
    no test's output holds the one-time export's notice (or pays for it)."""
    from pcreg.registration.onnx_loading import load_onnx_network

    for name in ("indoor", "outdoor"):
        if load_onnx_network(name) is None:  # a copied export that did not open was removed:
            load_onnx_network(name)  # this exports it again


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` (or $PCREG_SHARED_DATA); skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """A randomly initialised, tiny registration model saved as a loadable checkpoint: fast
    plumbing tests of everything that takes ``--model PATH`` (its estimates are meaningless)."""
    from tiny_model import save_tiny_checkpoint

    path = save_tiny_checkpoint(tmp_path_factory.mktemp("model") / "tiny.pt")
    return path


@pytest.fixture(scope="session")
def room_pair():
    """``(src, ref, T_ref_src)``: the demo's generated room seen as two overlapping crops, the
    source moved by a random motion (float32 points in metres, float64 transform)."""
    from pcreg.demo import _room_pair

    return _room_pair(0)


@pytest.fixture(scope="session")
def three_pairs(room_pair) -> list[tuple[np.ndarray, np.ndarray]]:
    """Three different ``(src, ref)`` inputs: the room pair, its source turned 90 deg, and
    the pair swapped."""
    src, ref, _ = room_pair
    rot = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    return [(src, ref), ((src @ rot.T).astype(np.float32), ref), (ref, src)]
