"""``pcreg register`` with a shipped model imports neither torch nor Open3D (nor scipy, whose
``spatial`` alone cost 0.15-0.3 s to import): the networks run on ONNX Runtime and the geometry
around them on numpy, small_gicp and pykdtree (issue #44). ``PCREG_RUNTIME=torch`` brings the
torch path back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

HEAVY = ("torch", "open3d", "scipy.spatial")

_RUN = """
import json, sys
from pcreg.cli import main
code = main(sys.argv[1:])
heavy = [m for m in {heavy!r} if m in sys.modules]
sys.stderr.write("@@" + json.dumps({{"code": code, "heavy": heavy}}) + "\\n")
"""


def _register(args: list[str], env: dict[str, str] | None = None) -> tuple[dict, dict]:
    proc = subprocess.run(
        [sys.executable, "-c", _RUN.format(heavy=HEAVY), "register", *args, "--json"],
        capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=600,
    )  # fmt: skip
    tail = [ln for ln in proc.stderr.splitlines() if ln.startswith("@@")]
    assert tail, proc.stderr[-2000:]
    return json.loads(tail[-1][2:]), json.loads(proc.stdout)


@pytest.fixture(scope="module")
def exported():
    """The shipped networks' graphs in the test session's cache (``PCREG_CACHE_DIR``, set by
    conftest.py; exported here, with torch, if missing)."""
    from pcreg.registration.onnx_loading import load_onnx_network

    for name in ("indoor", "outdoor"):
        if load_onnx_network(name) is None:
            pytest.fail(f"the {name} network did not export (see the log)")


def test_register_on_the_real_indoor_pair_loads_no_heavy_library(exported, shared_data):
    demo = shared_data / "geotransformer_repo" / "demo"
    # with --gt too: its errors are numpy's (pcreg.geometry.lean_metrics; torch's metrics cost
    # 0.7-0.9 s of import there)
    args = [str(demo / "src.npy"), str(demo / "ref.npy"), "--gt", str(demo / "gt.npy")]
    state, record = _register(args)
    assert state == {"code": 0, "heavy": []}
    assert record["registered"] is True and record["right"] is True
    assert record["rre_deg"] < 5 and record["rmse_m"] < 0.2
    gt = np.load(demo / "gt.npy")
    assert np.abs(np.asarray(record["transform"])[:3, 3] - gt[:3, 3]).max() < 0.3


def test_register_on_a_kitti_pair_loads_no_heavy_library(exported, shared_data):
    kitti = shared_data / "kitti00_scancontext"
    state, record = _register([str(kitti / "000094.bin"), str(kitti / "000095.bin")])
    assert state == {"code": 0, "heavy": []}
    assert record["registered"] is True and record["model"] == "outdoor"


def test_the_torch_runtime_still_runs_on_request(exported, tmp_path):
    rng = np.random.default_rng(3)
    ref = rng.random((4000, 3)) * [3.0, 2.0, 1.0]
    np.save(tmp_path / "ref.npy", ref)
    np.save(tmp_path / "src.npy", ref[::2] + np.array([0.05, 0.0, 0.0]))
    args = [str(tmp_path / "src.npy"), str(tmp_path / "ref.npy"), "--method", "geotransformer"]
    state, _ = _register(args, {"PCREG_RUNTIME": "torch"})
    assert state["code"] in (0, 3) and "torch" in state["heavy"]
    state, _ = _register(args)
    assert "torch" not in state["heavy"]
