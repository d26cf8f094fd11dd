"""Simulated range sensors over an Open3D ``RaycastingScene``.

* :class:`DepthCamera`: a pinhole depth camera (camera frame: x right, y down, z forward, as
  in 3DMatch's camera coordinates) with the Kinect axial noise model of Nguyen et al. (3DIMPVT
  2012), sigma(z) = 0.0012 + 0.0019 (z - 0.4)^2 metres, a working range, grazing-angle dropout
  and random holes (dark / reflective patches).
* :class:`SpinningLidar`: a 64-beam spinning LiDAR like KITTI's Velodyne HDL-64E (vertical
  field +2 deg to -24.8 deg, sensor frame x forward, y left, z up), with range noise, a range
  limit and random dropout.
* :class:`PanoramicScanner`: a terrestrial laser scanner's station: every direction from -75
  to +85 deg of elevation (a tripod hides the floor beneath it), 2 mm range noise; a whole
  room in one scan.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import open3d as o3d

__all__ = ["DepthCamera", "PanoramicScanner", "SpinningLidar", "raycaster"]


def raycaster(mesh: o3d.geometry.TriangleMesh) -> o3d.t.geometry.RaycastingScene:
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(o3d.t.geometry.TriangleMesh.from_legacy(mesh))
    return scene


def _cast(scene, origins: np.ndarray, dirs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rays = np.concatenate([origins, dirs], 1).astype(np.float32)
    hit = scene.cast_rays(o3d.core.Tensor(rays))
    return hit["t_hit"].numpy(), hit["primitive_normals"].numpy()


@dataclass(frozen=True)
class DepthCamera:
    """Pinhole depth camera. Default: a Kinect-like 4:3 camera at quarter resolution."""

    width: int = 160
    height: int = 120
    fx: float = 131.0
    fy: float = 131.0
    min_depth: float = 0.4
    max_depth: float = 3.0
    max_incidence_deg: float = 78.0
    holes_per_frame: float = 1.5

    def scan(self, scene, camera_to_world: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Points ``(N, 3)`` float64 in the *world* frame seen from ``camera_to_world`` (4x4)."""
        u, v = np.meshgrid(np.arange(self.width) + 0.5, np.arange(self.height) + 0.5)
        u += rng.uniform(-0.5, 0.5, u.shape)  # no exact pixel grid: avoids aliasing patterns
        v += rng.uniform(-0.5, 0.5, v.shape)
        d_cam = np.stack(
            [(u - self.width / 2) / self.fx, (v - self.height / 2) / self.fy, np.ones_like(u)], -1
        ).reshape(-1, 3)
        d_cam /= np.linalg.norm(d_cam, axis=1, keepdims=True)
        rot, origin = camera_to_world[:3, :3], camera_to_world[:3, 3]
        d_world = d_cam @ rot.T
        t_hit, normals = _cast(scene, np.broadcast_to(origin, d_world.shape), d_world)
        depth = t_hit * d_cam[:, 2]  # z in the camera frame
        cos_inc = np.abs((normals * d_world).sum(1))
        keep = np.isfinite(t_hit) & (depth > self.min_depth) & (depth < self.max_depth)
        keep &= cos_inc > np.cos(np.deg2rad(self.max_incidence_deg))
        # holes: a few elliptical image regions return nothing
        img_keep = np.ones((self.height, self.width), bool)
        for _ in range(rng.poisson(self.holes_per_frame)):
            cy, cx = rng.uniform(0, self.height), rng.uniform(0, self.width)
            ry, rx = rng.uniform(2, self.height / 6), rng.uniform(2, self.width / 6)
            yy, xx = np.ogrid[: self.height, : self.width]
            img_keep &= ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 > 1
        keep &= img_keep.ravel()
        sigma = 0.0012 + 0.0019 * (depth[keep] - 0.4) ** 2
        t_noisy = t_hit[keep] + rng.normal(0, 1, keep.sum()) * sigma / np.maximum(
            d_cam[keep, 2], 1e-3
        )
        return origin + d_world[keep] * t_noisy[:, None]


@dataclass(frozen=True)
class SpinningLidar:
    """64 beams, 0.17 deg azimuth steps (2118 columns), 1.5-80 m."""

    num_beams: int = 64
    fov_up_deg: float = 2.0
    fov_down_deg: float = -24.8
    azimuth_steps: int = 2118
    min_range: float = 1.5
    max_range: float = 80.0
    range_noise: float = 0.02
    dropout: float = 0.05

    def scan(self, scene, sensor_to_world: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Points ``(N, 3)`` float64 in the *sensor* frame."""
        elev = np.deg2rad(np.linspace(self.fov_up_deg, self.fov_down_deg, self.num_beams))
        elev = elev + rng.normal(0, np.deg2rad(0.02), elev.shape)  # per-beam calibration error
        az = np.linspace(-np.pi, np.pi, self.azimuth_steps, endpoint=False)
        az = az + rng.uniform(0, 2 * np.pi / self.azimuth_steps)
        e, a = np.meshgrid(elev, az, indexing="ij")
        d_sensor = np.stack([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)], -1)
        d_sensor = d_sensor.reshape(-1, 3)
        rot, origin = sensor_to_world[:3, :3], sensor_to_world[:3, 3]
        t_hit, _ = _cast(scene, np.broadcast_to(origin, d_sensor.shape), d_sensor @ rot.T)
        keep = np.isfinite(t_hit) & (t_hit > self.min_range) & (t_hit < self.max_range)
        keep &= rng.random(t_hit.shape) > self.dropout
        r = t_hit[keep] + rng.normal(0, self.range_noise, keep.sum())
        return d_sensor[keep] * r[:, None]


@dataclass(frozen=True)
class PanoramicScanner:
    """A terrestrial scanner's station: ``columns`` x ``rows`` rays over the full azimuth and
    -75 to +85 deg of elevation, 0.5-25 m, 2 mm range noise."""

    columns: int = 720
    rows: int = 300
    min_elevation_deg: float = -75.0
    max_elevation_deg: float = 85.0
    min_range: float = 0.5
    max_range: float = 25.0
    range_noise: float = 0.002

    def scan(self, scene, position: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Points ``(N, 3)`` float64 in the *world* frame, seen from ``position (3,)``."""
        az = (np.arange(self.columns) + rng.uniform(0, 1)) / self.columns * 2 * np.pi
        el = np.deg2rad(np.linspace(self.min_elevation_deg, self.max_elevation_deg, self.rows))
        a, e = np.meshgrid(az, el)
        dirs = np.stack([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)], -1)
        dirs = dirs.reshape(-1, 3)
        t_hit, _ = _cast(scene, np.broadcast_to(position, dirs.shape), dirs)
        keep = np.isfinite(t_hit) & (t_hit > self.min_range) & (t_hit < self.max_range)
        r = t_hit[keep] + rng.normal(0, self.range_noise, keep.sum())
        return position + dirs[keep] * r[:, None]
