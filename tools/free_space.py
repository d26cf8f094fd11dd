"""The free-space measure (:func:`pcreg.geometry.visibility.seen_free_space`) at the truth and
at wrong poses of real and generated pairs: what :data:`pcreg.registration.verdict.
MAX_FREE_SPACE` was chosen on.

    python tools/free_space.py [--shared ../shared] [--moves 4] [--seed 1]

For each pair (the real pairs of ``../shared/data``, the TUM frames and every sixth KITTI
training pair of ``../shared/train_data``, four generated scanner stations and four generated
room fragments), both clouds voxelised at the setting's voxel (5 cm; streets 0.3 m):

* ``truth``: the share at the true pose, each reference seen from its own origin (its sensor);
* ``moved eye``: the most over ``--moves`` random motions of the reference (a uniform
  rotation and up to a third of its extent), the truth moved with it: its origin is no
  longer its sensor;
* the share at wrong poses: the truth turned 10, 30, 90 and 180 deg about the vertical
  through the moved source's centre, and shifted by a tenth and by 0.3 of the reference's
  extent.

Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TURNS = (10, 30, 90, 180)
SHIFTS = (0.1, 0.3)


def _pairs(shared: Path):
    """(name, src, ref, T_ref_src, voxel, up axis) of every pair that exists."""
    from pcreg.bench.real_pairs import real_pairs
    from pcreg.bench.zero_shot import _tum
    from pcreg.io import read_points

    for pair in real_pairs(shared / "data"):
        up = 1 if pair.setting == "indoor" else 2  # 3DMatch's camera frames: y is vertical
        voxel = 0.05 if pair.setting == "indoor" else 0.3
        yield (pair.name, read_points(pair.src), read_points(pair.ref),
               np.asarray(pair.gt, np.float64), voxel, up)  # fmt: skip
    tum = shared / "train_data" / "tum_fr1xyz_depth_pairs"
    if tum.is_dir():
        for name, s, r, gt in _tum(tum):
            yield f"TUM {name}", s, r, gt, 0.05, 1
    kitti = shared / "train_data" / "kitti_seq00-07_semantickitti_mini"
    if (kitti / "pairs.json").is_file():
        for p in json.loads((kitti / "pairs.json").read_text())["pairs"][::6]:
            s, r = (np.fromfile(kitti / p[k], np.float32).reshape(-1, 4)[:, :3] for k in
                    ("src", "ref"))  # fmt: skip
            name = f"KITTI {p['seq']} {p['ref_frame']}<-{p['src_frame']}"
            yield name, s, r, np.asarray(p["T_ref_src"], np.float64), 0.3, 2
    from pcreg.data.synthetic.pairs import indoor_pairs
    from pcreg.data.synthetic.stations import station_pair

    for seed in range(4300, 4304):  # seeds no room tool uses
        st = station_pair(seed)
        yield f"station {seed}", st.src, st.ref, st.transform, 0.05, 2
    for p in indoor_pairs(4300, 0.3)[:4]:
        yield f"fragments {p.scene} {p.ref_id}<-{p.src_id}", p.src, p.ref, p.transform, 0.05, 2


def _turned(gt: np.ndarray, centre: np.ndarray, deg: float, up: int) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    turn = np.eye(4)
    turn[:3, :3] = Rotation.from_rotvec(np.radians(deg) * np.eye(3)[up]).as_matrix()
    turn[:3, 3] = centre - turn[:3, :3] @ centre
    return turn @ gt


def main(argv: list[str] | None = None) -> int:
    from pcreg.bench.zero_shot import _motion
    from pcreg.geometry.clouds import voxel_downsample
    from pcreg.geometry.visibility import seen_free_space
    from pcreg.registration.checks import cloud_extent

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--moves", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    eye = np.zeros(3)

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    head = ["pair", "truth", "moved eye"] + [f"{d} deg" for d in TURNS]
    head += [f"shift {s:g}" for s in SHIFTS]
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * (len(head) - 1))
    for name, src, ref, gt, voxel, up in _pairs(args.shared):
        src = voxel_downsample(np.asarray(src, np.float64), voxel)
        ref = voxel_downsample(np.asarray(ref, np.float64), voxel)
        row = [name, share(seen_free_space(src, ref, gt, voxel, eye))]
        moved = []
        for _ in range(args.moves):
            m = _motion(rng, cloud_extent(ref), False)
            moved.append(seen_free_space(src, ref @ m[:3, :3].T + m[:3, 3], m @ gt, voxel, eye))
        row.append(share(max((v for v in moved if v is not None), default=None)))
        centre = src.mean(axis=0) @ gt[:3, :3].T + gt[:3, 3]
        for deg in TURNS:
            row.append(share(seen_free_space(src, ref, _turned(gt, centre, deg, up), voxel, eye)))
        extent = cloud_extent(ref)
        for s in SHIFTS:
            away = gt.copy()
            away[:3, 3] += s * extent * np.array([2.0, 1.0, 0.0]) / np.sqrt(5.0)
            row.append(share(seen_free_space(src, ref, away, voxel, eye)))
        print("| " + " | ".join(row) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
