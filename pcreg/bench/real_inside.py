"""Real object scans composited onto real RGB-D frames: the object-in-scene search
(:mod:`pcreg.registration.inside`) on real scans, as issue #42's kept-back pairs bring them (a
0.2 m object or template to be found in a 3 m scene).

The generated cases of :mod:`pcreg.data.synthetic.inside` are clean objects on clean planes.
Here each case is built from real scans in ``../shared/train_data``:

* the **scene**: a TUM RGB-D depth frame (``tum_fr1xyz_depth_pairs``, a cluttered desk, about
  300,000 points with the sensor's noise), with one real range view of the Stanford bunny or
  dragon (``stanford_*_range_scans``, 15-44 thousand points, their own scanner) set upright on
  the frame's largest plane (its RANSAC fit: the desk, or the floor), turned at random about
  the plane's normal, its object's lowest point on the plane, the frame's points it would
  displace removed. A composite: the scene holds the side the Stanford scanner saw, not the
  side the TUM camera would see, and nothing occludes it;
* the **query** (the source), moved by a random rigid motion:

  * ``crop``: that same view, 70 % of its points kept at random (a crop of the scene,
    resampled);
  * ``template``: the whole object, every range view of it merged by its published pose
    (Open3D's voxel grid at 2 mm), of which the scene holds one side;
  * in a quarter of the draws, a **negative**: the other object (its template, or one of its
    views), which the scene does not hold.

The truth is known by construction. A pose is right as in ``tools/inside_rule.py``: its
rotation within 5 deg of the truth and the query's centre within 10 % of its extent. Nothing
is fitted on these cases.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["KINDS", "InsideCase", "real_inside_cases", "right"]

#: the query kinds (module doc)
KINDS = ("crop", "template")
#: the share of the draws whose query is the other object (a negative)
NEGATIVE_SHARE = 0.25

_OBJECTS = (
    ("bunny", "stanford_bunny_range_scans"),
    ("dragon", "stanford_dragon_stand_range_scans"),
)


@dataclass
class InsideCase:
    """One pair: the query ``src (N, 3)`` to be found in the scene ``ref (M, 3)`` (float64,
    metres); ``transform (4, 4)`` maps it there (None: a negative, refused only is right)."""

    kind: str
    name: str
    src: np.ndarray
    ref: np.ndarray
    transform: np.ndarray | None


def right(transform: np.ndarray, truth: np.ndarray, src: np.ndarray) -> bool:
    """Rotation within 5 deg of ``truth`` and the centre of ``src (N, 3)`` within 10 % of its
    extent (:func:`~pcreg.registration.checks.cloud_extent`)."""
    from pcreg.registration.checks import cloud_extent
    from pcreg.registration.verdict import pose_distance

    deg, shift = pose_distance(transform, truth, src.mean(axis=0))
    return deg < 5.0 and shift < 0.1 * cloud_extent(src)


def _views(folder: Path) -> list[tuple[str, np.ndarray]]:
    """Each range view of an object in its world frame (its published pose)."""
    meta = json.loads((folder / "pairs.json").read_text())
    out = []
    for scan in meta["scans"]:
        pose = np.asarray(scan["T_world_scan"], np.float64)
        points = np.load(folder / scan["file"]).astype(np.float64)
        out.append((Path(scan["file"]).stem, points @ pose[:3, :3].T + pose[:3, 3]))
    return out


def _whole(views: list[tuple[str, np.ndarray]], voxel: float = 0.002) -> np.ndarray:
    import open3d as o3d

    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.vstack([v for _, v in views])))
    return np.asarray(cloud.voxel_down_sample(voxel).points)


def _table(frame: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The frame's largest plane (Open3D's RANSAC, seeded, 1 cm): its points projected onto
    it, and its unit normal toward the camera (the frame's origin)."""
    import open3d as o3d

    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(frame[::4]))
    o3d.utility.random.seed(0)
    plane, inliers = cloud.segment_plane(0.01, 3, 500)
    normal = np.asarray(plane[:3], np.float64)
    normal /= np.linalg.norm(normal)
    points = np.asarray(cloud.points)[np.asarray(inliers, np.int64)]
    if normal @ -points.mean(axis=0) < 0:
        normal = -normal
    along = points @ normal
    return points - np.outer(along - np.median(along), normal), normal


def _cleared(frame: np.ndarray, obj: np.ndarray, up: np.ndarray) -> np.ndarray:
    """``frame`` without the points the object set on it would displace: those more than
    1 cm above its plane (``up``: the unit normal, the plane through the object's lowest
    point), at most 1 cm over its top, whose foot on the plane lies within 1 cm of the
    object's footprint (its points' feet)."""
    from scipy.spatial import cKDTree

    base = float(np.min(obj @ up))
    height = frame @ up - base
    feet = cKDTree((obj - np.outer(obj @ up, up))[::10])
    gap, _ = feet.query(frame - np.outer(frame @ up, up), distance_upper_bound=0.01)
    top = float(np.max(obj @ up)) - base
    inside = np.isfinite(gap) & (height > 0.01) & (height < top + 0.01)
    return frame[~inside]


def real_inside_cases(
    train_data: Path, count: int, kind: str, seed: int = 0
) -> Iterator[InsideCase]:
    """``count`` seeded cases of ``kind`` (:data:`KINDS`; module doc). Raises
    FileNotFoundError where the TUM frames or the object scans are missing."""
    from scipy.spatial.transform import Rotation

    from pcreg.bench.zero_shot import _tum

    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: one of {', '.join(KINDS)}")
    objects = {name: _views(train_data / folder) for name, folder in _OBJECTS}
    wholes = {name: _whole(views) for name, views in objects.items()}
    frames = [c for _, s, r, _ in _tum(train_data / "tum_fr1xyz_depth_pairs") for c in (s, r)]
    tables = [_table(f) for f in frames]
    rng = np.random.default_rng(seed)

    def turn() -> np.ndarray:
        return Rotation.random(random_state=int(rng.integers(1 << 30))).as_matrix()

    for _ in range(count):
        name = ("bunny", "dragon")[int(rng.integers(2))]
        view_name, view = objects[name][int(rng.integers(len(objects[name])))]
        index = int(rng.integers(len(frames)))
        (top, up), frame = tables[index], frames[index]
        spot = top[int(rng.integers(len(top)))]
        upright = Rotation.align_vectors([up], [[0.0, 1.0, 0.0]])[0].as_matrix()  # y up
        rot = upright @ Rotation.from_euler("y", rng.uniform(0, 360), degrees=True).as_matrix()
        placed = wholes[name] @ rot.T
        low = placed[np.argmin(placed @ up)]
        shift = spot - placed.mean(axis=0) + ((placed.mean(axis=0) - low) @ up) * up
        scene = np.vstack([_cleared(frame, placed + shift, up), view @ rot.T + shift])
        query = wholes[name] if kind == "template" else view[rng.random(len(view)) < 0.7]
        place = np.eye(4)
        place[:3, :3], place[:3, 3] = rot, shift
        label = f"{name} {view_name} in TUM frame {index}"
        if rng.random() < NEGATIVE_SHARE:
            other = "dragon" if name == "bunny" else "bunny"
            views = objects[other]
            query = wholes[other] if kind == "template" else views[int(rng.integers(len(views)))][1]
            place, label = None, f"{other} (absent) vs {label}"
        motion = np.eye(4)
        motion[:3, :3], motion[:3, 3] = turn(), rng.normal(size=3)
        src = query @ motion[:3, :3].T + motion[:3, 3]
        truth = None if place is None else place @ np.linalg.inv(motion)
        yield InsideCase(kind, label, src, scene, truth)
