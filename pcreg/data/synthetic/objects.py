"""Generated objects and their range scans: turntable views of a random composite shape.

An object is a few primitives (a bumpy ellipsoid body, boxes, cylinders, spheres) merged into
one mesh of ``size`` metres (0.1-0.4 m, the size of the objects in the Stanford scanning
repository); ``symmetric=True`` makes it one box or one cylinder, whose views fit in more than
one pose. Views are taken by a depth camera on a circle around it (a turntable), each in the
camera's frame, so two views differ by a rigid motion known exactly. No evaluation object
(the Stanford bunny or dragon) is used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from open3d.geometry import TriangleMesh as Mesh

from pcreg.data.synthetic.pairs import SyntheticPair, _camera_pose, overlap_ratio
from pcreg.data.synthetic.scanners import DepthCamera, raycaster
from pcreg.data.synthetic.scenes import _box, _cylinder, _merge, _sphere

__all__ = ["generated_object", "object_pairs", "object_views"]

#: a close-range camera: 480 x 360 pixels, 0.2-1.5 m (a structured-light scanner's range)
OBJECT_CAMERA = DepthCamera(width=480, height=360, fx=450.0, fy=450.0, min_depth=0.2,
                            max_depth=1.5, holes_per_frame=0.5)  # fmt: skip


@dataclass
class ObjectViews:
    """``views`` float32 ``(N_i, 3)`` in each camera's frame; ``poses`` camera-to-object."""

    views: list[np.ndarray]
    poses: list[np.ndarray]
    size: float


def generated_object(rng: np.random.Generator, size: float, symmetric: bool = False) -> Mesh:
    """A composite object about ``size`` metres across, centred at the origin."""
    if symmetric:
        if rng.random() < 0.5:
            mesh = _box((0, 0, 0), rng.uniform(0.5, 1.0, 3))
        else:
            mesh = _cylinder((0, 0), 0.0, rng.uniform(0.2, 0.5), rng.uniform(0.5, 1.0), 48)
    else:
        parts = [_sphere((0, 0, 0.4), 0.35, rng, bumpy=rng.uniform(0.05, 0.2))]
        parts[0].scale(1.0, center=(0, 0, 0.4))
        verts = np.asarray(parts[0].vertices)
        verts *= rng.uniform(0.6, 1.3, 3)  # an ellipsoid body
        for _ in range(rng.integers(2, 6)):
            kind = rng.integers(3)
            at = rng.uniform(-0.35, 0.35, 3) + np.array([0.0, 0.0, 0.4])
            if kind == 0:
                parts.append(_box(at, rng.uniform(0.05, 0.35, 3), rng.uniform(0, np.pi)))
            elif kind == 1:
                parts.append(_cylinder(at[:2], at[2], rng.uniform(0.03, 0.12),
                                       rng.uniform(0.1, 0.4)))  # fmt: skip
            else:
                parts.append(_sphere(at, rng.uniform(0.05, 0.18), rng, bumpy=0.1))
        mesh = _merge(parts)
    mesh.compute_vertex_normals()
    box = mesh.get_axis_aligned_bounding_box()
    mesh.translate(-box.get_center())
    mesh.scale(size / float(np.linalg.norm(box.get_extent())), center=(0, 0, 0))
    return mesh


def object_views(seed: int, num_views: int = 8, symmetric: bool = False) -> ObjectViews:
    """``num_views`` turntable views of one generated object, 360 / ``num_views`` deg apart
    (jittered), the camera 2-4 object sizes away and 0-40 deg above the equator."""
    rng = np.random.default_rng(seed)
    size = float(rng.uniform(0.1, 0.4))
    mesh = generated_object(rng, size, symmetric)
    scene = raycaster(mesh)
    distance = max(size * rng.uniform(2.0, 4.0), 0.3)
    elevation = np.radians(rng.uniform(0, 40))
    start = rng.uniform(0, 2 * np.pi)
    views, poses = [], []
    for k in range(num_views):
        azimuth = start + 2 * np.pi * k / num_views + rng.normal(0, 0.05)
        direction = np.array([np.cos(azimuth) * np.cos(elevation),
                              np.sin(azimuth) * np.cos(elevation), np.sin(elevation)])  # fmt: skip
        position = direction * distance
        # the pairs module's camera looks along +x of its yaw frame, pitched down by pitch
        pose = _camera_pose(position, azimuth + np.pi, -elevation, rng.normal(0, 0.05))
        world = OBJECT_CAMERA.scan(scene, pose, rng)
        inv = np.linalg.inv(pose)
        views.append((world @ inv[:3, :3].T + inv[:3, 3]).astype(np.float32))
        poses.append(pose)
    return ObjectViews(views, poses, size)


def object_pairs(
    seed: int, min_overlap: float = 0.3, symmetric: bool = False
) -> list[SyntheticPair]:
    """View pairs of one generated object with overlap above ``min_overlap`` (at 1.5 mm)."""
    got = object_views(seed, symmetric=symmetric)
    pairs = []
    for i in range(len(got.views)):
        for j in range(i + 1, len(got.views)):
            if min(len(got.views[i]), len(got.views[j])) < 500:
                continue
            t = np.linalg.inv(got.poses[i]) @ got.poses[j]
            ov = overlap_ratio(got.views[j], got.views[i], t, 0.0015 + got.size / 200)
            if ov > min_overlap:
                pairs.append(SyntheticPair(got.views[i], got.views[j], t, ov,
                                           f"object-{seed:06d}", i, j))  # fmt: skip
    return pairs
