"""Closed box-shaped rooms and blocks standing in them, sampled uniformly (metres): what a
whole scanned room's fit rests on (its shell) and what stands in it (its clutter)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def box_shell(rng: np.random.Generator, size: Sequence[float], per_face: int) -> np.ndarray:
    """``(6 * per_face, 3)``: the six faces of the box ``[0, size]``, ``per_face`` uniform
    points each."""
    size = np.asarray(size, np.float64)
    faces = []
    for axis in range(3):
        for side in (0.0, 1.0):
            pts = rng.uniform(0, 1, (per_face, 3)) * size
            pts[:, axis] = side * size[axis]
            faces.append(pts)
    return np.concatenate(faces)


def blocks(
    rng: np.random.Generator, xs: Sequence[float], edge: float, per_block: int, y: float = 0.4
) -> np.ndarray:
    """Cubes of ``edge`` standing on the floor at ``(x, y)`` for each of ``xs``, each
    ``per_block`` points spread over its six faces."""
    out = []
    for x in xs:
        cube = rng.uniform(0, edge, (per_block, 3))
        face = rng.integers(3, size=per_block)
        cube[np.arange(per_block), face] = np.where(rng.random(per_block) < 0.5, 0.0, edge)
        out.append(cube + np.array([x, y, 0.0]))
    return np.concatenate(out)
