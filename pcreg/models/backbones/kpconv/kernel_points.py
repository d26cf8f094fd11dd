"""Rigid KPConv kernel point dispositions (Thomas et al., ICCV 2019, §3.2).

The paper places the K kernel points by minimising a potential: every pair of points repels
with energy 1/|x_i - x_j| and every point is attracted to the centre with energy 5|x_i|² (the
KPConv release's weights), one point fixed at the centre. We run that optimisation from several
random starts with plain clipped gradient descent, keep the lowest-energy result, and rescale it
so the moving points sit at a mean distance of 0.66 (of a unit radius) from the centre, as the
KPConv release does. Layers scale the unit disposition by their radius.

The result for (K=15, 3-D, centre fixed) is cached as package data (``dispositions/``) so every
install gets the same kernel; :func:`kernel_points` regenerates it when the file is missing.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

__all__ = ["cylindrical_kernel_points", "generate_kernel_points", "kernel_energy", "kernel_points"]

logger = logging.getLogger(__name__)

DISPOSITION_DIR = Path(__file__).resolve().parent / "dispositions"
MEAN_RADIUS_RATIO = 0.66


def kernel_energy(points: np.ndarray) -> float:
    """Repulsion + centre-attraction energy of a unit-scale disposition ``(K, 3)``."""
    diff = points[:, None] - points[None]
    dist = np.sqrt((diff**2).sum(-1))
    iu = np.triu_indices(len(points), 1)
    return float((1.0 / dist[iu]).sum() + 5.0 * (points**2).sum())


def _optimise(start: np.ndarray, steps: int) -> np.ndarray:
    x = start.copy()
    step_size = 1e-2
    for _ in range(steps):
        diff = x[:, None] - x[None]  # (K, K, 3)
        d2 = (diff**2).sum(-1)
        np.fill_diagonal(d2, np.inf)
        grad = -(diff / d2[..., None] ** 1.5).sum(1) + 10.0 * x  # d/dx of 1/|x_i-x_j| + 5|x|²
        grad[0] = 0.0  # the centre point is fixed
        norm = np.linalg.norm(grad, axis=1, keepdims=True)
        move = np.minimum(step_size * norm, 0.05)  # clipped step along the gradient
        x -= move * grad / (norm + 1e-12)
        step_size *= 0.9995
        if norm.max() < 1e-6:
            break
    return x


def generate_kernel_points(
    num_points: int = 15, dimension: int = 3, num_starts: int = 32, steps: int = 4000, seed: int = 0
) -> np.ndarray:
    """Optimise a centre-fixed disposition of ``num_points`` points; returns ``(K, dimension)``
    float64 at unit scale (mean distance of the moving points from the centre = 0.66)."""
    if num_points < 2:
        raise ValueError(f"a kernel needs at least 2 points, got {num_points}")
    rng = np.random.default_rng(seed)
    best, best_energy = None, np.inf
    for _ in range(num_starts):
        start = rng.uniform(-1, 1, size=(num_points, dimension))
        start = start / np.maximum(1.0, np.linalg.norm(start, axis=1, keepdims=True)) * 0.7
        start[0] = 0.0
        x = _optimise(start, steps)
        energy = kernel_energy(x)
        if energy < best_energy:
            best, best_energy = x, energy
    assert best is not None
    radii = np.linalg.norm(best[1:], axis=1)
    return best * (MEAN_RADIUS_RATIO / radii.mean())


def kernel_points(num_points: int = 15, dimension: int = 3) -> np.ndarray:
    """The cached unit disposition ``(K, dimension)`` float32 (generated once if missing)."""
    path = DISPOSITION_DIR / f"k_{num_points:03d}_center_{dimension}D.npy"
    if path.is_file():
        return np.load(path).astype(np.float32)
    logger.info("generating a %d-point kernel disposition (cached at %s)", num_points, path)
    points = generate_kernel_points(num_points, dimension)
    try:
        from pcreg._fs import atomic_output

        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(path, overwrite=True) as tmp:
            np.save(tmp, points)
    except OSError:  # read-only install: keep it in memory only
        logger.warning("could not cache the kernel disposition at %s", path)
    return points.astype(np.float32)


def cylindrical_kernel_points(num_points: int = 15) -> np.ndarray:
    """A unit disposition ``(K, 3)`` float32 in the ``(ρ, 0, h)`` half-plane, ``ρ >= 0``.

    For kernels that see only the distance from the local normal axis (``ρ``) and the height
    along it (``h``). Layout: one row of points on the tangent plane (``h = 0``, where flat
    patches put all their neighbors, so their radial profile is resolved finely), then rows
    above and below. ``K = 15``: 5 on the plane at ``ρ = 0, .25, .5, .75, 1``, 3 per row at
    ``h = ±0.4`` (``ρ = 0, .45, .9``), 2 per row at ``h = ±0.8`` (``ρ = .2, .6``).
    """
    if num_points != 15:
        raise ValueError(f"the cylindrical disposition is defined for 15 points, got {num_points}")
    rows = [(0.0, [0.0, 0.25, 0.5, 0.75, 1.0]), (0.4, [0.0, 0.45, 0.9]), (-0.4, [0.0, 0.45, 0.9]),
            (0.8, [0.2, 0.6]), (-0.8, [0.2, 0.6])]  # fmt: skip
    pts = [(rho, 0.0, h) for h, rhos in rows for rho in rhos]
    return np.asarray(pts, dtype=np.float32)
