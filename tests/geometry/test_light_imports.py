"""The geometry around the network on the default register path loads neither torch nor Open3D
(0.7 s and 0.5 s of import time, issue #44) nor scipy (0.15-0.2 s for scipy.spatial): importing
it, and running it on a generated room, in a fresh interpreter."""

from __future__ import annotations

import ast
import subprocess
import sys

MODULES = (
    "pcreg.geometry.manhattan",
    "pcreg.geometry.cube_ranking",
    "pcreg.geometry.clouds",
    "pcreg.geometry.lean_metrics",
    "pcreg.baselines.icp",
    "pcreg.registration.verify",
    "pcreg.registration.verdict",
    "pcreg.registration.information",
)

HEAVY = ("torch", "open3d", "scipy")

RUN = """
import numpy as np
from pcreg.baselines.icp import icp_refine
from pcreg.geometry.clouds import downsample_with_normals
from pcreg.geometry.cube_ranking import cube_hypothesis_scores
from pcreg.geometry.manhattan import estimate_manhattan_frame
from pcreg.registration.information import pose_uncertainty
from pcreg.registration.symmetry import symmetry_probe
from pcreg.registration.verify import verify

rng = np.random.default_rng(0)
floor = np.c_[rng.uniform(0, 3, (3000, 2)), np.zeros(3000)]
wall = np.c_[rng.uniform(0, 3, 1500), np.zeros(1500), rng.uniform(0, 2, 1500)]
side = np.c_[np.zeros(1500), rng.uniform(0, 3, 1500), rng.uniform(0, 2, 1500)]
room = np.concatenate([floor, wall, side])
frame = estimate_manhattan_frame(room, voxel=0.1)
cube_hypothesis_scores(frame.points, frame.normals, frame.points, frame.normals)
start = np.eye(4)
start[:3, 3] = 0.03
fit = icp_refine(room, room, start, 0.1)
assert fit.fitness > 0.9
assert verify(room, room, fit.transform, 0.1).inliers > 0
down = downsample_with_normals(room, 0.1)
symmetry_probe(down, down, fit.transform, 0.1, room.mean(axis=0), 4.0)
pose_uncertainty(room, room, fit.transform, 0.1, "indoor")
"""


def _loaded_after(code: str) -> list[str]:
    check = f"import sys\n{code}\nprint(sorted({{m.split('.')[0] for m in sys.modules}}))"
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    loaded = ast.literal_eval(out.stdout.strip().splitlines()[-1])
    return [name for name in HEAVY if name in loaded]


def test_importing_the_geometry_loads_no_torch_open3d_or_scipy():
    assert _loaded_after("\n".join(f"import {m}" for m in MODULES)) == []


def test_running_the_geometry_loads_no_torch_open3d_or_scipy():
    assert _loaded_after(RUN) == []
