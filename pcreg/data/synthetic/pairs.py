"""Fragments / scans and registration pairs from the procedural scenes.

Indoor (3DMatch-like): a depth camera walks a smooth random path through a furnished room;
every ``frames_per_fragment`` (8) frames are fused into one fragment expressed in the camera frame
of its first frame and voxelised at 2.5 cm (3DMatch fuses 50 frames into a TSDF; PREDATOR's
fragments are voxelised at 2.5 cm). Pairs are all fragment pairs of a scene whose overlap is in
the requested range (> 0.3 like 3DMatch, 0.1-0.3 like 3DLoMatch).

Outdoor (KITTI-like): a 64-beam LiDAR 1.73 m above the ground drives along the street; scans
about ``spacing`` metres apart (KITTI's pairs are at least 10 m apart) form the pairs.

Overlap of a pair = fraction of source points that, moved by the ground truth, have a reference
point within ``radius`` (1.5 voxel sizes: 3.75 cm indoors, 0.45 m outdoors), computed exactly
with a KD-tree on the stored clouds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import open3d as o3d
from scipy.spatial import cKDTree

from pcreg.data.synthetic.scanners import DepthCamera, SpinningLidar, raycaster
from pcreg.data.synthetic.scenes import indoor_room, outdoor_street

__all__ = [
    "SyntheticPair",
    "indoor_fragments",
    "indoor_pairs",
    "outdoor_pairs",
    "outdoor_scans",
    "overlap_ratio",
]

INDOOR_VOXEL = 0.025
OUTDOOR_VOXEL = 0.3


@dataclass
class SyntheticPair:
    """``ref = transform @ src``; clouds float32 ``(N, 3)`` in their own sensor frames (metres)."""

    ref: np.ndarray
    src: np.ndarray
    transform: np.ndarray
    overlap: float
    scene: str
    ref_id: int
    src_id: int


def overlap_ratio(src: np.ndarray, ref: np.ndarray, transform: np.ndarray, radius: float) -> float:
    """Fraction of ``src`` points within ``radius`` of ``ref`` after ``transform`` (4x4)."""
    moved = src @ transform[:3, :3].T + transform[:3, 3]
    dist, _ = cKDTree(ref).query(moved, k=1, distance_upper_bound=radius)
    return float(np.mean(np.isfinite(dist)))


def _voxelise(points: np.ndarray, voxel: float) -> np.ndarray:
    pcd = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points.astype(np.float64)))
    return np.asarray(pcd.voxel_down_sample(voxel).points)


def _camera_pose(position: np.ndarray, yaw: float, pitch: float, roll: float) -> np.ndarray:
    """Camera-to-world for a camera at ``position`` looking along (yaw, pitch); camera axes x
    right, y down, z forward; world z up."""
    fwd = np.array([np.cos(yaw) * np.cos(pitch), np.sin(yaw) * np.cos(pitch), np.sin(pitch)])
    right = np.array([np.sin(yaw), -np.cos(yaw), 0.0])
    down = np.cross(fwd, right)
    c, s = np.cos(roll), np.sin(roll)
    right, down = c * right + s * down, -s * right + c * down
    pose = np.eye(4)
    pose[:3, :3] = np.stack([right, down, fwd], 1)
    pose[:3, 3] = position
    return pose


def _free(scene, position: np.ndarray, ceiling: float, clearance: float = 0.3) -> bool:
    """True when ``position`` is in the room's open space: nothing within ``clearance`` and
    nothing between it and the ceiling (so not inside a cabinet or under a table)."""
    q = o3d.core.Tensor(position[None].astype(np.float32))
    if float(scene.compute_distance(q).numpy()[0]) < clearance:
        return False
    up = np.array([[*position, 0.0, 0.0, 1.0]], np.float32)
    t_up = float(scene.cast_rays(o3d.core.Tensor(up))["t_hit"].numpy()[0])
    return t_up > ceiling - position[2] - 0.1


def indoor_fragments(
    seed: int,
    num_fragments: int = 8,
    frames_per_fragment: int = 8,
    camera: DepthCamera | None = None,
    voxel: float = INDOOR_VOXEL,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Fragments (float32, fragment frame) and their poses (fragment-to-room 4x4) of one room."""
    rng = np.random.default_rng(seed)
    camera = camera or DepthCamera()
    mesh, extent = indoor_room(rng)
    scene = raycaster(mesh)
    margin = 0.4
    for _ in range(1000):
        pos = np.array(
            [
                rng.uniform(margin, extent[0] - margin),
                rng.uniform(margin, extent[1] - margin),
                rng.uniform(1.2, 1.7),
            ]
        )
        if _free(scene, pos, extent[2]):
            break
    yaw, heading = rng.uniform(0, 2 * np.pi), rng.uniform(0, 2 * np.pi)
    yaw_rate = rng.choice([-1, 1]) * np.deg2rad(rng.uniform(1.0, 2.5))
    fragments, poses = [], []
    for _ in range(num_fragments):
        world_points, first = [], None
        for _ in range(frames_per_fragment):
            pitch = np.deg2rad(rng.normal(-12, 6))
            pose = _camera_pose(pos, yaw, pitch, np.deg2rad(rng.normal(0, 2)))
            first = pose if first is None else first
            world_points.append(camera.scan(scene, pose, rng))
            heading += rng.normal(0, 0.3)
            step = rng.uniform(0.02, 0.07) * np.array([np.cos(heading), np.sin(heading), 0])
            new = pos + step
            new[2] = np.clip(new[2] + rng.normal(0, 0.01), 1.0, 1.9)
            if _free(scene, new, extent[2]):
                pos = new
            else:  # blocked by a wall or furniture: turn somewhere else
                heading += rng.uniform(np.pi / 2, 3 * np.pi / 2)
            yaw += yaw_rate + rng.normal(0, 0.01)
            if rng.random() < 0.05:
                yaw_rate = -yaw_rate
        pts = np.concatenate(world_points, 0)
        inv = np.linalg.inv(first)
        local = pts @ inv[:3, :3].T + inv[:3, 3]
        fragments.append(_voxelise(local, voxel).astype(np.float32))
        poses.append(first)
    return fragments, poses


def indoor_pairs(
    seed: int,
    min_overlap: float = 0.1,
    max_overlap: float = 1.0,
    num_fragments: int = 8,
    frames_per_fragment: int = 8,
) -> list[SyntheticPair]:
    """All fragment pairs of one generated room with ``min_overlap < overlap <= max_overlap``."""
    frags, poses = indoor_fragments(seed, num_fragments, frames_per_fragment)
    pairs = []
    for i in range(len(frags)):
        for j in range(i + 1, len(frags)):
            if len(frags[i]) < 3000 or len(frags[j]) < 3000:  # a camera facing a wall
                continue
            t = np.linalg.inv(poses[i]) @ poses[j]  # fragment j (src) -> fragment i (ref)
            ov = overlap_ratio(frags[j], frags[i], t, 1.5 * INDOOR_VOXEL)
            if min_overlap < ov <= max_overlap:
                pairs.append(SyntheticPair(frags[i], frags[j], t, ov, f"room-{seed:06d}", i, j))
    return pairs


def outdoor_scans(
    seed: int, num_scans: int = 8, spacing: float = 10.0, lidar: SpinningLidar | None = None
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Scans (float32, sensor frame) and sensor-to-world poses along one generated street."""
    rng = np.random.default_rng(seed)
    lidar = lidar or SpinningLidar()
    length = spacing * (num_scans + 1) + 40
    mesh = outdoor_street(rng, length)
    scene = raycaster(mesh)
    scans, poses = [], []
    x = 20.0
    for _ in range(num_scans):
        y = rng.normal(0, 0.3)
        # ground height under the sensor: cast straight down
        probe = np.array([[x, y, 50.0, 0, 0, -1]], np.float32)
        ground = 50.0 - float(scene.cast_rays(o3d.core.Tensor(probe))["t_hit"].numpy()[0])
        pose = np.eye(4)
        yaw, pitch, roll = (
            rng.normal(0, np.deg2rad(3)),
            rng.normal(0, np.deg2rad(0.5)),
            rng.normal(0, np.deg2rad(0.5)),
        )
        pose[:3, :3] = o3d.geometry.get_rotation_matrix_from_xyz((roll, pitch, yaw))
        pose[:3, 3] = (x, y, ground + 1.73)
        scans.append(lidar.scan(scene, pose, rng).astype(np.float32))
        poses.append(pose)
        x += spacing + rng.normal(0, 0.5)
    return scans, poses


def outdoor_pairs(seed: int, num_scans: int = 8, spacing: float = 10.0) -> list[SyntheticPair]:
    """Consecutive scans of one street (about ``spacing`` metres apart) as pairs."""
    scans, poses = outdoor_scans(seed, num_scans, spacing)
    pairs = []
    for i in range(len(scans) - 1):
        t = np.linalg.inv(poses[i]) @ poses[i + 1]  # scan i+1 (src) -> scan i (ref)
        ref_v, src_v = _voxelise(scans[i], OUTDOOR_VOXEL), _voxelise(scans[i + 1], OUTDOOR_VOXEL)
        ov = overlap_ratio(src_v, ref_v, t, 1.5 * OUTDOOR_VOXEL)
        pairs.append(SyntheticPair(scans[i], scans[i + 1], t, ov, f"street-{seed:06d}", i, i + 1))
    return pairs
