"""Manhattan frames: the orientation of a room scan up to the 24 rotations of a cube.

Indoor scenes are mostly built from three mutually orthogonal families of planes (floor and
ceiling, two families of walls, the faces of furniture): the "Manhattan world" assumption of
Coughlan & Yuille (ICCV 1999). The directions of those planes' normals fix the orientation of a
scan up to the rotational symmetries of a cube (24 of them: which axis is which, and its sign).

So two overlapping room scans, each rotated so that its Manhattan axes are the coordinate axes,
differ by one of 24 cube rotations plus a small residual (the error of the two estimates, a few
degrees). :class:`pcreg.registration.search.ManhattanHypotheses` uses this to register indoor
pairs under any rotation with a network trained on small rotations only: one hypothesis per cube
rotation, the one whose correspondences agree best wins.

The estimate: point normals (PCA over neighbors, as Open3D's: :mod:`pcreg.geometry.clouds`) vote
for directions; the direction with the most normals within ``inlier_deg`` is the first axis;
among the normals roughly orthogonal to it, the most supported direction is the second; the
third is their cross product. Each axis is refined as the principal direction of its inlier
normals.
"""

from __future__ import annotations

import itertools
import logging

import numpy as np

__all__ = [
    "CUBE_ROTATIONS",
    "ManhattanFrame",
    "canonicalize_pair",
    "estimate_manhattan_frame",
    "manhattan_axes",
]

logger = logging.getLogger(__name__)


def _cube_rotations() -> np.ndarray:
    """The 24 proper rotations mapping the coordinate axes onto themselves: ``(24, 3, 3)``
    float64 signed permutation matrices with determinant +1, the identity first."""
    mats = []
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((1.0, -1.0), repeat=3):
            m = np.zeros((3, 3))
            m[range(3), perm] = signs
            if np.linalg.det(m) > 0:
                mats.append(m)
    mats.sort(key=lambda m: -np.trace(m))  # identity (trace 3) first
    return np.stack(mats)


#: ``(24, 3, 3)`` float64: the rotation group of the cube, identity first.
CUBE_ROTATIONS: np.ndarray = _cube_rotations()


class ManhattanFrame:
    """Result of :func:`estimate_manhattan_frame`.

    Attributes:
        rotation: ``(3, 3)`` float64 ``R`` with the Manhattan axes as rows, so ``R @ p``
            expresses a point in the Manhattan frame (the axes become x, y, z).
        support: ``(3,)`` float64 fraction of the voxels whose normal lies within the inlier
            angle of each axis (the third may be small: a scan of two walls has no floor); a
            voxel without a normal supports none.
        points: ``(V, 3)`` float64 the voxel-downsampled cloud's voxels that have a normal
            (input frame, metres).
        normals: ``(V, 3)`` float64 its unit normals, turned towards the cloud's centroid.
    """

    def __init__(
        self,
        rotation: np.ndarray,
        support: np.ndarray,
        points: np.ndarray | None = None,
        normals: np.ndarray | None = None,
    ) -> None:
        self.rotation = rotation
        self.support = support
        self.points = points
        self.normals = normals

    def __repr__(self) -> str:
        return f"ManhattanFrame(support={np.round(self.support, 3).tolist()})"


def _normals(
    points: np.ndarray, voxel: float, workers: int = 1
) -> tuple[np.ndarray, np.ndarray, int]:
    """The ``voxel``-downsampled cloud's voxels that have a normal ``(V, 3)``, their unit
    normals ``(V, 3)`` (neighbours within 2.5 voxels, at most 30), turned towards the whole
    cloud's centroid (towards the sensor, roughly, for a scan taken from inside a room), and
    the count of all voxels; float64, the input's units. Open3D's voxel means and normals,
    computed without Open3D (:mod:`pcreg.geometry.clouds`). A voxel with fewer than 3 points
    within 2.5 voxels has no normal and is left out: Open3D's placeholder ``(0, 0, 1)`` would
    vote for an axis (a 3 m box of 6,000 uniform random points, 8 cm apart, had half of its
    voxels on that axis, and its "Manhattan frame" ran 17 network hypotheses)."""
    from pcreg.geometry.clouds import estimate_normals, voxel_downsample

    down = voxel_downsample(points, voxel)
    # sorted (x, then y, then z) the result (the seeded candidate draw below) depends on the
    # point set only, not on how the file lists it
    pts = down[np.lexsort(down.T[::-1])]
    normals, count = estimate_normals(pts, 2.5 * voxel, max_nn=30, workers=workers,
                                      with_counts=True)  # fmt: skip
    away = np.einsum("ij,ij->i", normals, pts.mean(0) - pts) < 0
    normals[away] *= -1.0
    return pts[count >= 3], normals[count >= 3], len(pts)


def _dominant_direction(
    normals: np.ndarray, cos_in: float, rng: np.random.Generator, candidates: int
) -> tuple[np.ndarray, np.ndarray]:
    """The unit direction (sign-free) most normals lie within ``arccos(cos_in)`` of, refined
    as the principal axis of those inliers; returns it and the inlier mask."""
    pick = rng.choice(len(normals), size=min(candidates, len(normals)), replace=False)
    votes = (np.abs(normals[pick] @ normals.T) >= cos_in).sum(1)
    best = normals[pick[int(np.argmax(votes))]]
    for _ in range(3):  # refine: principal direction of the inliers, then re-select them
        inl = np.abs(normals @ best) >= cos_in
        _, vecs = np.linalg.eigh(normals[inl].T @ normals[inl])
        best = vecs[:, -1]
    return best, np.abs(normals @ best) >= cos_in


def estimate_manhattan_frame(
    points: np.ndarray,
    voxel: float = 0.05,
    inlier_deg: float = 10.0,
    candidates: int = 400,
    seed: int = 0,
    workers: int = 1,
) -> ManhattanFrame:
    """Manhattan axes of a scan.

    Args:
        points: ``(N, 3)`` metres, N >= 10 after ``voxel`` downsampling.
        voxel: downsampling voxel (metres) before normal estimation (normals from neighbors
            within 2.5 voxels).
        inlier_deg: a normal supports an axis within this angle.
        candidates: normals tried as the first / second axis (the rest only vote).
        seed: the candidate draw (the result is deterministic for a seed).
        workers: threads of the normals' neighbour search (the registration passes
            :func:`pcreg.engine.threads.current_threads`).

    Returns:
        :class:`ManhattanFrame`; its ``rotation`` is a proper rotation (det +1).
    """
    pts, normals, voxels = _normals(points, voxel, workers)
    if voxels < 10:
        raise ValueError(f"too few points for a Manhattan frame: {voxels} voxels")
    if len(normals) < 10:
        raise TooFewNormals(
            f"too few points for a Manhattan frame: {len(normals)} of {voxels} voxels have a "
            "normal (the points lie too far apart)"
        )
    rot = manhattan_axes(normals, inlier_deg, np.random.default_rng(seed), candidates)
    cos_in = float(np.cos(np.radians(inlier_deg)))
    support = np.array([np.count_nonzero(np.abs(normals @ a) >= cos_in) / voxels for a in rot])
    return ManhattanFrame(rot, support, pts, normals)


class TooFewNormals(ValueError):
    """Fewer than 10 voxels of a cloud have a normal: its points lie too far apart at the
    frame's voxel for a Manhattan frame."""


def manhattan_axes(
    normals: np.ndarray, inlier_deg: float, rng: np.random.Generator, candidates: int
) -> np.ndarray:
    """``(3, 3)`` float64, a proper rotation with the axes as rows: the direction most of the
    unit ``normals (V, 3)`` lie within ``inlier_deg`` of (sign-free), the most supported
    direction among the normals roughly orthogonal to it, and their cross product (the
    estimate of :func:`estimate_manhattan_frame`, which draws ``candidates`` normals from
    ``rng`` as each axis's candidates). V >= 1."""
    cos_in = float(np.cos(np.radians(inlier_deg)))
    a1, _ = _dominant_direction(normals, cos_in, rng, candidates)
    # the second axis: among the normals roughly orthogonal to the first, projected onto
    # its orthogonal plane
    ortho = normals[np.abs(normals @ a1) <= np.sin(np.radians(2 * inlier_deg))]
    ortho = ortho - np.outer(ortho @ a1, a1)
    norms = np.linalg.norm(ortho, axis=1)
    ortho = ortho[norms > 1e-6] / norms[norms > 1e-6, None]
    if len(ortho) >= 3:
        a2, _ = _dominant_direction(ortho, cos_in, rng, candidates)
    else:  # a single plane: any orthogonal direction (the hypotheses cover the rest poorly)
        a2 = np.cross(a1, np.eye(3)[int(np.argmin(np.abs(a1)))])
    a2 = a2 - (a2 @ a1) * a1
    a2 /= np.linalg.norm(a2)
    return np.stack([a1, a2, np.cross(a1, a2)])


def canonicalize_pair(
    src: np.ndarray,
    ref: np.ndarray,
    transform: np.ndarray,
    voxel: float = 0.05,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A training pair as the Manhattan orientation search presents it to the network when
    it tries the right hypothesis.

    Both clouds are rotated into their Manhattan frames, the source additionally by the cube
    rotation that leaves it closest to the reference under the ground truth ``transform``
    (``ref = T @ src``), so the pair is left with the estimates' residual (a few degrees)
    apart. With ``rng`` both are then turned by the same random cube rotation: inference sees
    all 24 axis-aligned orientations (the axes are ordered by support, which varies).

    Returns ``(src', ref', T')`` with ``ref' = T' @ src'``; the dtypes of the inputs.
    """
    r_ref = estimate_manhattan_frame(ref, voxel=voxel).rotation
    r_src = estimate_manhattan_frame(src, voxel=voxel).rotation
    rel = r_ref @ np.asarray(transform, np.float64)[:3, :3] @ r_src.T
    # angle of rel @ G^T is smallest where trace(rel @ G^T) = sum(rel * G) is largest
    cube = CUBE_ROTATIONS[int(np.argmax(np.einsum("ij,gij->g", rel, CUBE_ROTATIONS)))]
    r_src = cube @ r_src
    if rng is not None:
        common = CUBE_ROTATIONS[int(rng.integers(len(CUBE_ROTATIONS)))]
        r_ref, r_src = common @ r_ref, common @ r_src
    t = np.eye(4)
    t[:3, :3] = r_ref @ transform[:3, :3] @ r_src.T
    t[:3, 3] = r_ref @ transform[:3, 3]
    return (
        (src @ r_src.T).astype(src.dtype),
        (ref @ r_ref.T).astype(ref.dtype),
        t,
    )
