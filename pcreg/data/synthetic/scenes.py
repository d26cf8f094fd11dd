"""Procedural scenes as Open3D triangle meshes (metres, z up).

Indoor: a room (floor, ceiling, four walls) with furniture and clutter built from boxes,
cylinders and thin planes (tables, shelves, cabinets, sofas, chairs, pillars, lamps, pictures,
doors, small objects on surfaces). Outdoor: a street along +x (ground with gentle relief,
buildings with gaps, poles, parked and driving vehicles, trees and bushes).
"""

from __future__ import annotations

import numpy as np
import open3d as o3d

__all__ = ["indoor_room", "outdoor_street"]

Mesh = o3d.geometry.TriangleMesh


def _box(lo, size, yaw: float = 0.0) -> Mesh:
    """Axis-aligned box with min corner ``lo`` and ``size``, rotated by ``yaw`` about its
    vertical centre line."""
    sx, sy, sz = (max(float(s), 1e-3) for s in size)
    m = Mesh.create_box(sx, sy, sz)
    m.translate(np.asarray(lo, float))
    if yaw:
        centre = np.asarray(lo, float) + np.array([sx, sy, 0.0]) / 2
        m.rotate(Mesh.get_rotation_matrix_from_xyz((0.0, 0.0, yaw)), center=centre)
    return m


def _cylinder(centre_xy, z0: float, radius: float, height: float, resolution: int = 24) -> Mesh:
    m = Mesh.create_cylinder(radius, height, resolution=resolution)
    m.translate((centre_xy[0], centre_xy[1], z0 + height / 2))
    return m


def _sphere(centre, radius: float, rng: np.random.Generator, bumpy: float = 0.0) -> Mesh:
    m = Mesh.create_sphere(radius, resolution=10)
    if bumpy:
        v = np.asarray(m.vertices)
        v *= 1.0 + bumpy * rng.uniform(-1, 1, size=(len(v), 1))
        m.vertices = o3d.utility.Vector3dVector(v)
    m.translate(np.asarray(centre, float))
    return m


def _merge(meshes: list[Mesh]) -> Mesh:
    out = Mesh()
    for m in meshes:
        out += m
    return out


def indoor_room(rng: np.random.Generator) -> tuple[Mesh, np.ndarray]:
    """A furnished room. Returns the mesh and its extent ``(3,)`` (x, y, z sizes in metres)."""
    lx, ly, lz = rng.uniform(3.5, 8.0), rng.uniform(3.0, 6.5), rng.uniform(2.4, 3.0)
    t = 0.05
    parts = [
        _box((-t, -t, -t), (lx + 2 * t, ly + 2 * t, t)),  # floor
        _box((-t, -t, lz), (lx + 2 * t, ly + 2 * t, t)),  # ceiling
        _box((-t, -t, 0), (t, ly + 2 * t, lz)),
        _box((lx, -t, 0), (t, ly + 2 * t, lz)),
        _box((0, -t, 0), (lx, t, lz)),
        _box((0, ly, 0), (lx, t, lz)),
    ]
    # an L-shaped alcove or a wall recess breaks the box symmetry most of the time
    if rng.random() < 0.7:
        w, d = rng.uniform(0.8, 2.0), rng.uniform(0.4, 1.2)
        parts.append(_box((lx - w, ly - d, 0), (w, d, lz)))
    if rng.random() < 0.5:  # a beam or soffit
        parts.append(_box((rng.uniform(0, lx - 1), 0, lz - 0.3), (0.3, ly, 0.3)))

    def free_spot(size):
        return (
            rng.uniform(0.1, max(0.2, lx - size[0] - 0.1)),
            rng.uniform(0.1, max(0.2, ly - size[1] - 0.1)),
        )

    surfaces = []  # (x0, y0, sx, sy, z) tops where clutter can sit
    for _ in range(rng.integers(6, 14)):
        kind = rng.choice(["table", "shelf", "cabinet", "sofa", "chair", "bed", "desk"])
        yaw = float(rng.choice([0.0, np.pi / 2])) + rng.normal(0, 0.05)
        if kind in ("table", "desk"):
            sx, sy, h = rng.uniform(0.8, 1.8), rng.uniform(0.6, 1.0), rng.uniform(0.7, 0.78)
            x, y = free_spot((sx, sy))
            parts.append(_box((x, y, h - 0.04), (sx, sy, 0.04), yaw))
            for dx, dy in ((0.05, 0.05), (sx - 0.1, 0.05), (0.05, sy - 0.1), (sx - 0.1, sy - 0.1)):
                parts.append(_box((x + dx, y + dy, 0), (0.05, 0.05, h - 0.04), yaw))
            surfaces.append((x, y, sx, sy, h))
        elif kind == "shelf":
            sx, sy, h = rng.uniform(0.6, 1.5), rng.uniform(0.3, 0.45), rng.uniform(1.2, 2.1)
            x, y = free_spot((sx, sy))
            parts.append(_box((x, y, 0), (sx, 0.02, h), yaw))  # back
            for k in range(int(h / 0.4) + 1):
                parts.append(_box((x, y, min(k * 0.4, h - 0.02)), (sx, sy, 0.02), yaw))
            surfaces.append((x, y, sx, sy, h))
        elif kind in ("cabinet", "bed", "sofa"):
            size = {
                "cabinet": (rng.uniform(0.5, 1.2), rng.uniform(0.4, 0.6), rng.uniform(0.8, 1.9)),
                "bed": (rng.uniform(1.4, 2.0), rng.uniform(1.9, 2.1), rng.uniform(0.45, 0.6)),
                "sofa": (rng.uniform(1.6, 2.4), rng.uniform(0.8, 1.0), rng.uniform(0.4, 0.5)),
            }[kind]
            x, y = free_spot(size)
            parts.append(_box((x, y, 0), size, yaw))
            if kind == "sofa":
                parts.append(_box((x, y, 0), (size[0], 0.2, 0.85), yaw))  # backrest
            surfaces.append((x, y, size[0], size[1], size[2]))
        else:  # chair
            x, y = free_spot((0.45, 0.45))
            parts.append(_box((x, y, 0.42), (0.45, 0.45, 0.05), yaw))
            parts.append(_box((x, y, 0.42), (0.45, 0.04, 0.45), yaw))
            for dx, dy in ((0, 0), (0.41, 0), (0, 0.41), (0.41, 0.41)):
                parts.append(_box((x + dx, y + dy, 0), (0.04, 0.04, 0.42), yaw))
    for _ in range(rng.integers(5, 16)):  # floor clutter: boxes, bags, bins
        s = rng.uniform(0.15, 0.6, size=3)
        x, y = free_spot(s[:2])
        if rng.random() < 0.3:
            parts.append(_cylinder((x + s[0] / 2, y + s[0] / 2), 0, s[0] / 2, s[2]))
        else:
            parts.append(_box((x, y, 0), s, rng.uniform(0, np.pi)))
    for _ in range(rng.integers(0, 3)):  # pillars, lamps, bins
        r = rng.uniform(0.1, 0.3)
        x, y = free_spot((2 * r, 2 * r))
        parts.append(_cylinder((x + r, y + r), 0, r, rng.uniform(0.4, lz)))
    for _ in range(rng.integers(1, 4)):  # pictures / doors / windows on walls (thin boxes)
        w, h = rng.uniform(0.4, 1.2), rng.uniform(0.4, 2.0)
        z = rng.uniform(0.0, max(0.01, lz - h))
        wall = rng.integers(4)
        if wall == 0:
            parts.append(_box((rng.uniform(0, lx - w), 0, z), (w, 0.04, h)))
        elif wall == 1:
            parts.append(_box((rng.uniform(0, lx - w), ly - 0.04, z), (w, 0.04, h)))
        elif wall == 2:
            parts.append(_box((0, rng.uniform(0, ly - w), z), (0.04, w, h)))
        else:
            parts.append(_box((lx - 0.04, rng.uniform(0, ly - w), z), (0.04, w, h)))
    for x0, y0, sx, sy, z in surfaces:  # clutter on top of furniture
        for _ in range(rng.integers(1, 7)):
            s = rng.uniform(0.05, 0.3, size=3)
            if rng.random() < 0.4:
                parts.append(
                    _cylinder((x0 + rng.uniform(0, sx), y0 + rng.uniform(0, sy)), z, s[0] / 2, s[2])
                )
            else:
                parts.append(
                    _box(
                        (
                            x0 + rng.uniform(0, max(0.01, sx - s[0])),
                            y0 + rng.uniform(0, max(0.01, sy - s[1])),
                            z,
                        ),
                        s,
                        rng.uniform(0, np.pi),
                    )
                )
    return _merge(parts), np.array([lx, ly, lz])


def outdoor_street(rng: np.random.Generator, length: float = 160.0) -> Mesh:
    """A straight street along +x from x = 0 to ``length`` (metres), centred on y = 0."""
    half = rng.uniform(3.5, 7.0)  # half road width
    parts = []
    # ground with gentle relief: a coarse height-field grid
    xs = np.linspace(-40, length + 40, 48)
    ys = np.linspace(-60, 60, 40)
    gx, gy = np.meshgrid(xs, ys, indexing="ij")
    gz = 0.15 * np.sin(gx / rng.uniform(15, 40)) + 0.1 * np.sin(gy / rng.uniform(8, 20))
    gz += np.where(np.abs(gy) > half, 0.12, 0.0)  # curbs / sidewalks
    verts = np.stack([gx.ravel(), gy.ravel(), gz.ravel()], 1)
    nx, ny = len(xs), len(ys)
    tris = []
    for i in range(nx - 1):
        for j in range(ny - 1):
            a, b, c, d = i * ny + j, (i + 1) * ny + j, (i + 1) * ny + j + 1, i * ny + j + 1
            tris += [(a, b, c), (a, c, d)]
    ground = Mesh(o3d.utility.Vector3dVector(verts), o3d.utility.Vector3iVector(np.array(tris)))
    parts.append(ground)
    for side in (-1, 1):
        x = -30.0
        while x < length + 30:  # buildings with gaps
            w = rng.uniform(6, 25)
            if rng.random() < 0.8:
                setback = half + rng.uniform(2.5, 8.0)
                depth, height = rng.uniform(8, 20), rng.uniform(4, 22)
                y0 = setback if side > 0 else -setback - depth
                parts.append(_box((x, y0, 0), (w, depth, height), rng.normal(0, 0.03)))
                if rng.random() < 0.4:  # a balcony / awning row
                    yb = setback - 1.0 if side > 0 else -setback
                    parts.append(_box((x, yb, rng.uniform(2.5, 4)), (w, 1.0, 0.15)))
            x += w + rng.uniform(1, 12)
        x = rng.uniform(-30, -10)
        while x < length + 30:  # poles
            y = side * (half + rng.uniform(0.5, 1.5))
            parts.append(_cylinder((x, y), 0, rng.uniform(0.08, 0.2), rng.uniform(3, 9), 10))
            x += rng.uniform(8, 30)
        x = rng.uniform(-30, 0)
        while x < length + 30:  # parked cars
            if rng.random() < 0.6:
                ln, wd = rng.uniform(3.8, 5.0), rng.uniform(1.7, 2.0)
                y = side * (half - wd / 2 - rng.uniform(0.1, 0.4))
                yaw = rng.normal(0, 0.05)
                parts.append(_box((x, y - wd / 2, 0.3), (ln, wd, 0.8), yaw))
                parts.append(
                    _box(
                        (x + 0.25 * ln, y - wd / 2 + 0.1, 1.1),
                        (0.5 * ln, wd - 0.2, rng.uniform(0.4, 0.6)),
                        yaw,
                    )
                )
            x += rng.uniform(5, 14)
        x = rng.uniform(-30, 0)
        while x < length + 30:  # trees and bushes
            y = side * (half + rng.uniform(1.5, 6.0))
            if rng.random() < 0.6:
                h = rng.uniform(2.5, 5)
                parts.append(_cylinder((x, y), 0, rng.uniform(0.1, 0.3), h, 8))
                parts.append(_sphere((x, y, h + 1.0), rng.uniform(1.2, 2.8), rng, bumpy=0.25))
            else:
                parts.append(_sphere((x, y, 0.4), rng.uniform(0.5, 1.2), rng, bumpy=0.3))
            x += rng.uniform(6, 25)
    for _ in range(rng.integers(0, 4)):  # vehicles in the lanes
        x, y = rng.uniform(0, length), rng.choice([-1, 1]) * half / 2
        parts.append(_box((x, y - 0.9, 0.3), (rng.uniform(4, 12), 1.9, rng.uniform(1.2, 3.0))))
    return _merge(parts)
