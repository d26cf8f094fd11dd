"""Objects in scenes: a small cloud to be found inside a large one, with the exact answer.

A generated room (:func:`~pcreg.data.synthetic.scenes.indoor_room`) gets a few generated
objects (:func:`~pcreg.data.synthetic.objects.generated_object`) on its floor, each about
1/20 of the room's diagonal, and is scanned by a depth camera from a few places, one of them
looking at the first object: the **scene** (metres, room frame, voxelised at
:data:`SCENE_VOXEL`). Two kinds of small cloud are registered onto it:

* **crop**: a ball of the scene scan around the first object (0.2-0.5 m across), resampled
  (a random 60-85 % of its points, 1 mm noise: no point is shared with the scene) and moved
  by a random rigid motion;
* **template**: a surface sample of the whole first object (what a CAD model gives), moved by a
  random rigid motion; the scene holds only the part of it the cameras saw.

And the negatives, which have no right answer in the scene: the template of a *different*
generated object (absent from the scene), a crop of a *different* room, and a plane-ish slab
(a thin sheet that fits any wall or table top).

Each case is deterministic by seed. The tests use seeds from 1,000,000 on; the rule's
thresholds (:mod:`pcreg.registration.inside`) were measured on seeds below 1,000.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import open3d as o3d

from pcreg.data.synthetic.objects import generated_object
from pcreg.data.synthetic.pairs import _camera_pose, _free, _voxelise
from pcreg.data.synthetic.scanners import DepthCamera, raycaster
from pcreg.data.synthetic.scenes import _box, indoor_room

__all__ = ["KINDS", "SCENE_VOXEL", "InsideCase", "inside_case", "object_scene"]

#: the scene scan's voxel (metres): a 320 x 240 camera 1-3 m away samples 4-12 mm
SCENE_VOXEL = 0.005
#: a Kinect-like camera at half resolution
SCENE_CAMERA = DepthCamera(width=320, height=240, fx=262.0, fy=262.0, holes_per_frame=0.5)
#: the camera looking at the object: a Kinect at full resolution
CLOSE_CAMERA = DepthCamera(width=640, height=480, fx=525.0, fy=525.0, holes_per_frame=0.5)
#: the fewest points of the object the close view must see (else it looks from elsewhere)
MIN_SEEN = 2000
#: the cases: positives first, then the negatives (no right answer in the scene)
KINDS = ("crop", "template", "absent", "other-room", "slab")


@dataclass
class ObjectScene:
    """A scanned room with objects: ``scene (M, 3)`` float64, room frame (metres); the first
    object's ``mesh`` (object frame) and ``pose`` (object -> room, 4x4); its ``size``."""

    scene: np.ndarray
    mesh: o3d.geometry.TriangleMesh
    pose: np.ndarray
    size: float


@dataclass
class InsideCase:
    """``src (N, 3)`` to be registered onto ``ref (M, 3)`` (float64, metres); ``transform``:
    the true ``T_ref_src`` (4x4), None for a negative (no right answer); ``kind``: one of
    :data:`KINDS`."""

    src: np.ndarray
    ref: np.ndarray
    transform: np.ndarray | None
    kind: str
    seed: int


def _random_motion(rng: np.random.Generator, reach: float) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    motion = np.eye(4)
    motion[:3, :3] = Rotation.random(random_state=rng.integers(1 << 31)).as_matrix()
    motion[:3, 3] = rng.uniform(-reach, reach, 3)
    return motion


def _apply(t: np.ndarray, points: np.ndarray) -> np.ndarray:
    return points @ t[:3, :3].T + t[:3, 3]


def _on_object(points: np.ndarray, mesh, pose: np.ndarray) -> int:
    """How many of ``points`` (room frame) lie within 3 mm of the object ``mesh`` at ``pose``."""
    placed = o3d.geometry.TriangleMesh(mesh)
    placed.transform(pose)
    dist = raycaster(placed).compute_distance(o3d.core.Tensor(points.astype(np.float32)))
    return int((dist.numpy() < 0.003).sum())


def _sees(scene, pos: np.ndarray, target: np.ndarray, size: float) -> bool:
    """Whether nothing stands between a camera at ``pos`` and the object at ``target``."""
    ray = np.array([[*pos, *((target - pos) / np.linalg.norm(target - pos))]], np.float32)
    hit = float(scene.cast_rays(o3d.core.Tensor(ray))["t_hit"].numpy()[0])
    return hit > np.linalg.norm(target - pos) - size


def object_scene(seed: int) -> ObjectScene:
    """A room with 1-3 generated objects on its floor, each 1/20 of the room's diagonal,
    scanned from 3 places: one 0.8-1.5 m from the first object, looking at it, and two
    elsewhere in the room looking around."""
    rng = np.random.default_rng(seed)
    mesh, extent = indoor_room(rng)
    size = float(np.linalg.norm(extent)) / 20.0
    walls = raycaster(mesh)
    objects, poses = [], []
    for _ in range(int(rng.integers(1, 4))):
        for _ in range(500):  # a free spot on the floor, nothing above it
            xy = rng.uniform([0.5, 0.5], extent[:2] - 0.5)
            if _free(walls, np.array([*xy, size + 0.05]), extent[2], clearance=0.75 * size):
                break
        obj = generated_object(rng, size)
        pose = np.eye(4)
        pose[:3, :3] = o3d.geometry.get_rotation_matrix_from_xyz((0.0, 0.0, rng.uniform(0, 6.3)))
        lowest = float((np.asarray(obj.vertices) @ pose[:3, :3].T)[:, 2].min())
        pose[:3, 3] = (xy[0], xy[1], -lowest)
        objects.append(obj)
        poses.append(pose)
    world = mesh
    for obj, pose in zip(objects, poses, strict=True):
        placed = o3d.geometry.TriangleMesh(obj)
        placed.transform(pose)
        world += placed
    scene = raycaster(world)
    target = poses[0][:3, 3] + np.array([0.0, 0.0, size / 3])
    points = []
    view, tries = 0, 0
    while view < 3:
        tries += 1
        if tries > 60:
            raise RuntimeError(f"seed {seed}: the object is not seen from anywhere")
        for _ in range(500):
            if view == 0:  # look at the first object from 0.8-1.5 m
                angle, dist = rng.uniform(0, 2 * np.pi), rng.uniform(0.8, 1.5)
                pos = target + dist * np.array([np.cos(angle), np.sin(angle), 0.0])
                pos[2] = rng.uniform(0.8, 1.4)
            else:
                pos = np.array([*rng.uniform([0.4, 0.4], extent[:2] - 0.4), rng.uniform(1.2, 1.7)])
            inside = bool(np.all(pos[:2] > 0.3) and np.all(pos[:2] < extent[:2] - 0.3))
            if (
                inside
                and _free(scene, pos, extent[2], clearance=0.2)
                and (view > 0 or _sees(scene, pos, target, size))
            ):
                break
        if view == 0:
            look = target - pos
            yaw = float(np.arctan2(look[1], look[0]))
            pitch = float(np.arctan2(look[2], np.linalg.norm(look[:2])))
        else:
            yaw, pitch = rng.uniform(0, 2 * np.pi), np.radians(rng.normal(-15, 5))
        pose = _camera_pose(pos, yaw, pitch, np.radians(rng.normal(0, 2)))
        if view == 0:
            seen = CLOSE_CAMERA.scan(scene, pose, rng)
            if _on_object(seen, objects[0], poses[0]) < MIN_SEEN:  # occluded: look again
                continue
            points.append(seen)
        else:
            points.append(SCENE_CAMERA.scan(scene, pose, rng))
        view += 1
    fused = _voxelise(np.concatenate(points), SCENE_VOXEL)
    return ObjectScene(fused, objects[0], poses[0], size)


def _crop(rng: np.random.Generator, got: ObjectScene) -> tuple[np.ndarray, np.ndarray]:
    """A ball of the scene around the first object, resampled, and its true pose (identity:
    it is in the room frame)."""
    centre = got.pose[:3, 3] + np.array([0.0, 0.0, got.size / 3])
    radius = float(np.clip(rng.uniform(0.55, 0.8) * got.size, 0.1, 0.25))
    ball = got.scene[np.linalg.norm(got.scene - centre, axis=1) < radius]
    keep = rng.random(len(ball)) < rng.uniform(0.6, 0.85)
    return ball[keep] + rng.normal(0, 0.001, (int(keep.sum()), 3)), np.eye(4)


def _template(rng: np.random.Generator, mesh: o3d.geometry.TriangleMesh) -> np.ndarray:
    """A uniform surface sample of ``mesh`` (3,000-8,000 points, 0.5 mm noise)."""
    n = int(rng.integers(3000, 8000))
    o3d.utility.random.seed(int(rng.integers(1 << 30)))
    pts = np.asarray(mesh.sample_points_uniformly(n).points)
    return pts + rng.normal(0, 0.0005, pts.shape)


def _slab(rng: np.random.Generator, size: float) -> np.ndarray:
    """A thin sheet ``size`` across (3-8 mm thick): a plane-ish object that fits any wall."""
    side = size / np.sqrt(2)
    board = _box((0, 0, 0), (side * rng.uniform(0.8, 1.0), side * rng.uniform(0.6, 1.0),
                             rng.uniform(0.003, 0.008)))  # fmt: skip
    return _template(rng, board)


def inside_case(seed: int, kind: str) -> InsideCase:
    """One case of ``kind`` (:data:`KINDS`) from the scene of ``seed``; the small cloud is
    moved by a random rigid motion (any rotation, up to 2 m), so the truth is its inverse
    composed with the small cloud's pose in the room."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; use one of {KINDS}")
    got = object_scene(seed)
    rng = np.random.default_rng([seed, KINDS.index(kind)])
    if kind == "crop":
        small, pose = _crop(rng, got)
    elif kind == "template":
        small, pose = _template(rng, got.mesh), got.pose
    elif kind == "absent":
        other = generated_object(np.random.default_rng([seed, 7]), got.size)
        small, pose = _template(rng, other), None
    elif kind == "other-room":
        small, pose = _crop(rng, object_scene(seed + 500_000))[0], None
    else:
        small, pose = _slab(rng, got.size), None
    motion = _random_motion(rng, 2.0)
    src = _apply(motion, small)
    truth = None if pose is None else pose @ np.linalg.inv(motion)
    return InsideCase(src, got.scene, truth, kind, seed)
