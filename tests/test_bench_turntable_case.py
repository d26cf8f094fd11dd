"""The turntable case writer of ``tools/map_*.py`` (``pcreg.bench.turntable_map``): it writes
its moved views, and never over an earlier run's without ``overwrite`` (``--force``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pcreg.bench.turntable_map import turntable_case
from pcreg.errors import OutputExistsError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def root(tmp_path, rng):
    """A two-view turntable folder in the Stanford layout (``pairs.json`` and ``.npy`` views)."""
    folder = tmp_path / "object"
    folder.mkdir()
    from scipy.spatial.transform import Rotation

    scans = []
    for k in range(2):
        np.save(folder / f"v{k}.npy", rng.normal(size=(50, 3)))
        pose = np.eye(4)  # each view's own pose on the turntable, as the .conf files give it
        pose[:3, :3] = Rotation.from_euler("z", 36 * k + 10, degrees=True).as_matrix()
        pose[:3, 3] = [0.1 * k, -0.2, 0.05]
        scans.append({"file": f"v{k}.npy", "T_world_scan": pose.tolist()})
    (folder / "pairs.json").write_text(json.dumps({"scans": scans}))
    return folder


def test_views_are_written_moved_and_truth_puts_them_in_the_world(root, tmp_path):
    """``truth[k]`` maps the moved view k into the turntable's world frame, where the views
    lie as their ``T_world_scan`` puts them."""
    case = turntable_case(root, tmp_path / "views", seed=0)
    assert [f.name for f in case.files] == ["view_00.npy", "view_01.npy"]
    meta = {s["file"]: np.asarray(s["T_world_scan"]) for s in
            json.loads((root / "pairs.json").read_text())["scans"]}  # fmt: skip
    for file, truth, name in zip(case.files, case.truth, case.names, strict=True):
        moved = np.load(file)
        original = np.load(root / f"{name}.npy")
        pose = meta[f"{name}.npy"]
        world = original @ pose[:3, :3].T + pose[:3, 3]
        np.testing.assert_allclose(moved @ truth[:3, :3].T + truth[:3, 3], world, atol=1e-9)
        assert np.abs(moved - original).max() > 1e-3  # moved indeed


def test_an_earlier_run_is_kept_without_overwrite(root, tmp_path):
    first = turntable_case(root, tmp_path / "views", seed=0)
    before = {f: f.read_bytes() for f in first.files}
    with pytest.raises(OutputExistsError, match="already holds views"):
        turntable_case(root, tmp_path / "views", seed=1)
    assert {f: f.read_bytes() for f in first.files} == before
    again = turntable_case(root, tmp_path / "views", seed=1, overwrite=True)
    assert any(f.read_bytes() != before[f] for f in again.files)


@pytest.mark.parametrize("tool", ["map_turntable.py", "map_peer_open3d.py"])
def test_map_tools_refuse_an_earlier_out_in_one_line(root, tmp_path, tool):
    out = tmp_path / "out"
    (out / "views").mkdir(parents=True)
    (out / "views" / "view_00.npy").write_bytes(b"earlier run")
    run = subprocess.run([sys.executable, str(REPO / "tools" / tool), str(root), str(out)],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip().splitlines() == [
        f"{tool}: {out / 'views'}: already holds views (pass --force to replace them)"
    ]
    assert (out / "views" / "view_00.npy").read_bytes() == b"earlier run"
