"""The free-space measure (:func:`pcreg.geometry.visibility.seen_free_space`) at the truth and
at wrong poses of real and generated pairs: what :data:`pcreg.registration.verdict.
MAX_FREE_SPACE` and :data:`pcreg.geometry.visibility.SENSOR_HIDDEN` were chosen on.

    python tools/free_space.py [--shared ../shared] [--eyes 12] [--seed 1]

For each pair (the real pairs of ``../shared/data``, the TUM frames and every sixth KITTI
training pair of ``../shared/train_data``, four generated scanner stations, four generated
room fragments, and two Stanford dragon range scans scaled x10, an object a user's search
reads as a room), both clouds voxelised at the setting's voxel (5 cm; streets 0.3 m):

* ``truth``: the share at the true pose, the reference seen from its own origin; ``hidden``:
  how much of the reference hides behind itself from there
  (:func:`~pcreg.geometry.visibility.hidden_share`; a room's reference is judged only at
  :data:`~pcreg.geometry.visibility.SENSOR_HIDDEN` or under, streets from any eye near them);
* ``other eyes``: the reference put in a frame whose origin lies 0.1, 0.2, 0.33, 0.5, 0.7 or
  0.9 of its extent from its middle in a random direction, ``--eyes`` frames each, the truth
  moved with it: how many of those eyes are judged, and the most a right pose put in free
  space from them;
* the share at wrong poses: the truth turned 10, 30, 90 and 180 deg about the vertical
  through the moved source's centre, and shifted by a tenth and by 0.3 of the reference's
  extent, horizontally.

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
#: the other eyes' distances from the reference's middle, shares of its extent
EYE_DISTANCES = (0.1, 0.2, 0.33, 0.5, 0.7, 0.9)


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
    dragon = shared / "train_data" / "stanford_dragon_stand_range_scans"
    if dragon.is_dir():
        from pcreg.bench.zero_shot import _stanford

        for name, s, r, gt in _stanford(dragon, 2):
            gt = gt.copy()
            gt[:3, 3] *= 10
            yield f"dragon x10 {name}", s * 10, r * 10, gt, 0.05, 1


def _turned(gt: np.ndarray, centre: np.ndarray, deg: float, up: int) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    turn = np.eye(4)
    turn[:3, :3] = Rotation.from_rotvec(np.radians(deg) * np.eye(3)[up]).as_matrix()
    turn[:3, 3] = centre - turn[:3, :3] @ centre
    return turn @ gt


def _eyes(ref: np.ndarray, rng: np.random.Generator, count: int):
    """Frames ``(4, 4)`` (from the reference's) whose origin lies at :data:`EYE_DISTANCES` of
    the reference's extent from its middle, ``count`` random ones each, randomly turned."""
    from scipy.spatial.transform import Rotation

    from pcreg.registration.checks import cloud_extent

    extent, middle = cloud_extent(ref), np.median(ref, axis=0)
    for distance in EYE_DISTANCES:
        for _ in range(count):
            way = rng.normal(size=3)
            eye = middle + way / np.linalg.norm(way) * distance * extent
            frame = np.eye(4)
            frame[:3, :3] = Rotation.random(random_state=int(rng.integers(2**31))).as_matrix()
            frame[:3, 3] = -frame[:3, :3] @ eye
            yield frame


def main(argv: list[str] | None = None) -> int:
    from pcreg.geometry.clouds import downsample_with_normals
    from pcreg.geometry.visibility import hidden_share, seen_free_space, sensor_view
    from pcreg.registration.checks import cloud_extent

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--eyes", type=int, default=12, help="frames per distance")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    eye = np.zeros(3)

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    head = ["pair", "truth", "hidden", "other eyes: judged", "most at the truth"]
    head += [f"{d} deg" for d in TURNS] + [f"shift {s:g}" for s in SHIFTS]
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * (len(head) - 1))
    for name, src, ref, gt, voxel, up in _pairs(args.shared):
        street = voxel > 0.1
        src = np.asarray(downsample_with_normals(np.asarray(src, np.float64), voxel).points)
        down = downsample_with_normals(np.asarray(ref, np.float64), voxel)
        ref, normals = np.asarray(down.points), np.asarray(down.normals)

        def seen(s, r, n, pose, street=street, voxel=voxel):
            judged = None if street else sensor_view(r, n, eye, voxel)
            return seen_free_space(s, r, pose, voxel, eye, judged)

        row = [name, share(seen(src, ref, normals, gt)),
               f"{hidden_share(ref, normals, eye, voxel):.3f}"]  # fmt: skip
        others = []
        for frame in _eyes(ref, rng, args.eyes):
            moved = ref @ frame[:3, :3].T + frame[:3, 3]
            others.append(seen(src, moved, normals @ frame[:3, :3].T, frame @ gt))
        judged = [v for v in others if v is not None]
        row += [f"{len(judged)} / {len(others)}", share(max(judged, default=None))]
        centre = src.mean(axis=0) @ gt[:3, :3].T + gt[:3, 3]
        for deg in TURNS:
            row.append(share(seen(src, ref, normals, _turned(gt, centre, deg, up))))
        flat = np.ones(3)
        flat[up] = 0.0  # horizontal
        extent = cloud_extent(ref)
        for s in SHIFTS:
            away = gt.copy()
            away[:3, 3] += s * extent * flat / np.linalg.norm(flat)
            row.append(share(seen(src, ref, normals, away)))
        print("| " + " | ".join(row) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
