"""Point-cloud primitives in numpy over compiled k-d trees (pykdtree, small_gicp): voxel
downsampling and normals as Open3D computes them, without importing Open3D (0.4-0.5 s that the
registration path no longer pays at start) or scipy.spatial (0.15-0.2 s).

:func:`voxel_downsample` is Open3D's ``voxel_down_sample`` (the mean of the points of each cell
of a grid anchored half a voxel below the cloud's minimum), bit for bit: the same cells, and
each mean summed in the input's order and divided as Open3D does. :func:`estimate_normals` is
Open3D's ``estimate_normals`` with ``KDTreeSearchParamHybrid``: the covariance of each point's
``max_nn`` nearest neighbours within ``radius`` (itself included), its eigenvector of the
smallest eigenvalue by Open3D's closed-form solver (``FastEigen3x3``, after Eberly's "A Robust
Eigensolver for 3 x 3 Symmetric Matrices"), so the sign comes out as Open3D's too; ``(0, 0, 1)``
where fewer than 3 neighbours are found. On the real 3DMatch demo pair (0.05 m voxels, 2 and 2.5
voxel radii) and the KITTI pair 94/95 (0.3 m) every normal has Open3D's sign and lies within
1e-4 degrees of Open3D's where at least 4 points make its neighbourhood (3e-6 degrees on
3DMatch); where three nearly collinear points make the plane, the roundings differ by up to a
tenth of a degree (0.088 degrees at one of the 17k points of KITTI 94, where Open3D's own
error is 0.13 degrees), see ``tests/geometry/test_clouds.py``. The nearest neighbours come
from :class:`KdTree` (pykdtree and small_gicp).

The one difference: Open3D returns the voxels in the order of its hash map, which depends on the
order of the input; :func:`voxel_downsample` returns them sorted by cell (x, then y, then z
index), which depends on the point set only. So an even stride through the voxels picks other
points than it did (the verification's source above 8000 voxels, the symmetry probe's 600
points: :mod:`pcreg.registration.verify`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "Cloud",
    "KdTree",
    "as_cloud",
    "downsample_with_normals",
    "estimate_normals",
    "voxel_downsample",
]


@dataclass
class Cloud:
    """Points and (optionally) their normals: what pcreg's ICP and verification pass around in
    place of an Open3D ``PointCloud``, with the attributes they read of one (``points``,
    ``normals``, ``has_normals()``), so code written for either takes both.

    Attributes:
        points: ``(N, 3)`` float64, metres (or the input's units).
        normals: ``(N, 3)`` float64 unit normals, or None.
    """

    points: np.ndarray
    normals: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.points)

    def has_points(self) -> bool:
        return len(self.points) > 0

    def has_normals(self) -> bool:
        return self.normals is not None and len(self.normals) == len(self.points) > 0

    def to_open3d(self) -> Any:
        """An Open3D ``PointCloud`` of the same points and normals (imports Open3D)."""
        import open3d as o3d

        out = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(self.points))
        if self.normals is not None:
            out.normals = o3d.utility.Vector3dVector(self.normals)
        return out


def as_cloud(cloud: Any) -> Cloud:
    """A :class:`Cloud` of ``cloud``: a :class:`Cloud` (returned as is), an Open3D
    ``PointCloud`` (its points, and its normals where it has them; copied) or an ``(N, 3)``
    array (no normals)."""
    if isinstance(cloud, Cloud):
        return cloud
    if hasattr(cloud, "points"):  # an Open3D PointCloud, without importing Open3D to check
        points = np.array(cloud.points, np.float64).reshape(-1, 3)
        has = getattr(cloud, "has_normals", None)
        normals = np.array(cloud.normals, np.float64).reshape(-1, 3) if has and has() else None
        return Cloud(points, normals)
    return Cloud(np.asarray(cloud, np.float64).reshape(-1, 3))


def voxel_downsample(points: np.ndarray, voxel: float) -> np.ndarray:
    """Open3D's ``voxel_down_sample``: the mean of the points in each occupied cell of a grid of
    ``voxel`` metres whose corner is ``min(points) - voxel / 2``.

    Args:
        points: ``(N, 3)`` finite coordinates (any float dtype; computed in float64).
        voxel: cell size, > 0, in the points' units.

    Returns:
        ``(V, 3)`` float64, one row per occupied cell, sorted by cell (x, then y, then z
        index). Each row equals Open3D's bit for bit: the cell is found by the same float64
        arithmetic and its points are summed in the input's order (``numpy.bincount``) and
        divided by their count. 0.43 ms for the 16k points of a 3DMatch fragment at 5 cm,
        3.7 ms for a 122k-point KITTI scan at 0.3 m (Open3D: 0.50 and 3.7 ms), median of 5 on
        the 2-core development VM.
    """
    if not voxel > 0:
        raise ValueError(f"voxel must be positive, got {voxel}")
    points = np.asarray(points, np.float64).reshape(-1, 3)
    if len(points) == 0:
        return np.zeros((0, 3))
    coords = np.ascontiguousarray(points.T)  # (3, N): reductions along rows are 10x faster
    corner = coords.min(axis=1) - voxel * 0.5
    cells = np.floor((coords - corner[:, None]) / voxel).astype(np.int64)
    span = cells.max(axis=1) + 1
    if float(span[0]) * float(span[1]) * float(span[2]) < 2.0**62:
        key = (cells[0] * span[1] + cells[1]) * span[2] + cells[2]
        _, inverse = np.unique(key, return_inverse=True)
    else:  # a grid too fine to number in int64: group the index triples themselves
        _, inverse = np.unique(cells.T, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    count = np.bincount(inverse).astype(np.float64)
    out = np.empty((len(count), 3))
    for axis in range(3):
        out[:, axis] = np.bincount(inverse, weights=coords[axis], minlength=len(count))
    return out / count[:, None]


class KdTree:
    """Exact nearest neighbours among ``points (N, 3)``, answered with scipy
    ``cKDTree.query``'s conventions (a missing neighbour has distance ``inf`` and index ``N``;
    ``distance_upper_bound`` is strict, as Open3D's hybrid search) and the threads chosen per
    query, without scipy (``scipy.spatial`` takes 0.15-0.2 s to import).

    The nearest neighbour (``k = 1``) comes from pykdtree, which prunes by the distance bound:
    on the 2-core development VM, one thread, a KITTI scan at 0.3 m (17k points), 3.6 ms for
    its source's points near the reference (``cKDTree``: 7.6 ms, small_gicp: 3.0 ms) and
    0.8 ms for 5k points turned away from it (``cKDTree``: 1.2 ms, small_gicp, which cannot
    prune: 14 ms). The ``k > 1`` nearest come from small_gicp's tree, then cut at the bound:
    the 30 nearest within 2 voxels of each point of a 3DMatch fragment at 5 cm in 6.2 ms, of
    the KITTI scan in 38 ms (``cKDTree``: 5.3 and 27 ms, pykdtree: 14 and 50 ms). Each tree is
    built on its first query (0.2-1.9 ms)."""

    def __init__(self, points: np.ndarray) -> None:
        self.data = np.ascontiguousarray(points, np.float64).reshape(-1, 3)
        self._nearest: Any = None  # pykdtree.kdtree.KDTree
        self._knn: Any = None  # small_gicp.KdTree

    def __len__(self) -> int:
        return len(self.data)

    def query(
        self,
        points: np.ndarray,
        k: int = 1,
        distance_upper_bound: float = np.inf,
        workers: int = 1,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest of the tree's points to each of ``points (Q, 3)`` closer than
        ``distance_upper_bound`` (the points' units), by increasing distance, on ``workers``
        threads.

        Returns:
            ``(distances, indices)``: ``(Q,)`` float64 and int64 for ``k = 1``, else ``(Q, k)``;
            ``inf`` and ``N`` where there is no such neighbour.
        """
        points = np.ascontiguousarray(points, np.float64).reshape(-1, 3)
        n, workers = len(self.data), max(1, int(workers))
        if n == 0 or not len(points):
            dist, idx = np.full((len(points), k), np.inf), np.full((len(points), k), n, np.int64)
        elif k == 1:
            if self._nearest is None:
                from pykdtree.kdtree import KDTree

                self._nearest = KDTree(self.data)
            bound = None if np.isinf(distance_upper_bound) else float(distance_upper_bound)
            with _openmp_threads(workers):
                dist, idx = self._nearest.query(points, k=1, distance_upper_bound=bound)
            return dist, idx.astype(np.int64)
        else:
            idx, sq = self._k_nearest(points, k, distance_upper_bound, workers)
            dist = np.sqrt(sq)
            if k > n:  # cKDTree pads the columns a smaller tree cannot fill
                dist = np.pad(dist, ((0, 0), (0, k - n)), constant_values=np.inf)
                idx = np.pad(idx, ((0, 0), (0, k - n)), constant_values=n)
        return (dist[:, 0], idx[:, 0]) if k == 1 else (dist, idx)

    def _k_nearest(
        self, points: np.ndarray, k: int, bound: float, workers: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """small_gicp's ``min(k, N)`` nearest of each of ``points (Q, 3)`` (float64,
        contiguous), cut at ``bound``: int64 indices (``N`` beyond it) and squared distances
        (``inf`` beyond it), ``(Q, min(k, N))`` each."""
        if self._knn is None:
            import small_gicp

            self._knn = small_gicp.KdTree(self.data, 1)
        idx, sq = self._knn.batch_knn_search(points, min(k, len(self.data)), workers)
        idx = idx.astype(np.int64)
        far = ~(sq < bound * bound)  # also the unfound
        sq[far], idx[far] = np.inf, len(self.data)
        return idx, sq


#: threadpoolctl's handle on pykdtree's OpenMP runtime (found on the first query)
_PYKDTREE_OPENMP: list[Any] = []


def _openmp_threads(threads: int) -> Any:
    """A context that holds pykdtree's OpenMP runtime (its own copy of libgomp) to ``threads``
    threads (the registration passes the count :func:`pcreg.engine.threads.current_threads`
    fitted to the free cores; by default the runtime would start one per core); 5 us to enter
    and leave once the runtime is found (5 ms, once)."""
    if not _PYKDTREE_OPENMP:
        from threadpoolctl import ThreadpoolController

        controller = ThreadpoolController()
        paths = [i["filepath"] for i in controller.info() if "pykdtree" in i["filepath"]]
        _PYKDTREE_OPENMP.append(controller.select(filepath=paths) if paths else None)
    selected = _PYKDTREE_OPENMP[0]
    return selected.limit(limits=threads) if selected is not None else contextlib.nullcontext()


def estimate_normals(
    points: np.ndarray,
    radius: float,
    max_nn: int = 30,
    *,
    tree: KdTree | None = None,
    workers: int = 1,
    with_counts: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Open3D's ``estimate_normals(KDTreeSearchParamHybrid(radius, max_nn))`` on a cloud without
    normals.

    Args:
        points: ``(N, 3)`` float64.
        radius: neighbourhood radius, in the points' units.
        max_nn: most neighbours (the point itself included).
        tree: a :class:`KdTree` of ``points``, to reuse one.
        workers: threads of the k-d tree query.
        with_counts: also return each point's neighbour count ``(N,) int64`` (itself
            included, at most ``max_nn``): under 3, its normal is Open3D's placeholder.

    Returns:
        ``(N, 3)`` float64 unit normals: per point, the eigenvector of the smallest eigenvalue of
        the covariance of its (at most ``max_nn``) nearest points within ``radius``, with
        Open3D's sign (its closed-form eigensolver, ported); ``(0, 0, 1)`` where fewer than 3
        points are within ``radius`` or they coincide (``with_counts``: and the counts, as
        ``(normals, counts)``). Each covariance is computed from the
        neighbours' offsets to the point (Open3D sums raw moments of the coordinates, which
        loses digits as the cloud moves away from the origin); where three nearly collinear
        points make the plane, the two roundings can differ by a tenth of a degree (see the
        module doc). Slower than Open3D's C++: 2 voxels around the 4k voxels of a 3DMatch
        fragment in 11 ms against 7.6 ms, around the 17k of a KITTI scan in 37 against 32 ms
        (one thread each; with two, 8.3 against 4.9-6.7 ms and 25 against 17 ms: only the
        neighbour search runs on them), median of 5 on the 2-core development VM.
    """
    points = np.asarray(points, np.float64).reshape(-1, 3)
    n = len(points)
    if n == 0:
        return np.zeros((0, 3))
    tree = tree if tree is not None else KdTree(points)
    idx, _ = tree._k_nearest(points, max_nn, radius, max(1, int(workers)))
    valid = idx < n  # a missing neighbour has index n
    count = valid.sum(axis=1).astype(np.float64)
    padded = np.zeros((n + 1, 3))
    padded[:n] = points
    # offsets from the query point, 0 for the missing neighbours: (N, k) each (gathered one
    # contiguous coordinate at a time: 3 ms for 17k points against 8 ms for rows of 3)
    x, y, z = (_offsets(padded[:, axis].copy(), idx, valid) for axis in range(3))
    mean = np.stack([x.sum(1), y.sum(1), z.sum(1)], axis=1) / count[:, None]
    cov = np.empty((n, 3, 3))
    for a, b, u, v in ((0, 0, x, x), (0, 1, x, y), (0, 2, x, z), (1, 1, y, y), (1, 2, y, z),
                       (2, 2, z, z)):  # fmt: skip
        cov[:, a, b] = cov[:, b, a] = np.einsum("ij,ij->i", u, v) / count - mean[:, a] * mean[:, b]
    cov[count < 3] = np.eye(3)
    normals = _smallest_eigenvector(cov)
    normals[~np.any(normals, axis=1)] = (0.0, 0.0, 1.0)
    return (normals, count.astype(np.int64)) if with_counts else normals


def _offsets(coord: np.ndarray, idx: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``coord[idx] - coord[query]`` where ``valid``, else 0: ``coord (N + 1,)``, ``idx (N, k)``."""
    out = coord.take(idx)
    out -= coord[: len(idx), None]
    out *= valid
    return out


def downsample_with_normals(
    points: np.ndarray,
    voxel: float,
    radius_voxels: float = 2.0,
    max_nn: int = 30,
    *,
    workers: int = 1,
) -> Cloud:
    """``points (N, 3)`` voxelised at ``voxel`` (:func:`voxel_downsample`) with normals from
    neighbours within ``radius_voxels`` voxels, at most ``max_nn``
    (:func:`estimate_normals`): the clouds pcreg's point-to-plane ICP runs on, as
    :func:`pcreg.baselines.icp.downsample_with_normals` makes them with Open3D (the same points
    and normals, in cell order). ``workers``: threads of the neighbour search."""
    down = voxel_downsample(points, voxel)
    return Cloud(down, estimate_normals(down, radius_voxels * voxel, max_nn, workers=workers))


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cross product of ``(N, 3)`` arrays (``np.cross`` is slower on short rows)."""
    return np.stack(
        [
            a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1],
            a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2],
            a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0],
        ],
        axis=1,
    )


def _eigenvector0(rows: tuple[np.ndarray, ...], value: np.ndarray) -> np.ndarray:
    """Open3D's ``ComputeEigenvector0``: the unit null vector of ``A - value I`` as the
    largest of the cross products of its rows (ties to the first). ``rows``: the upper
    triangle ``a00, a01, a02, a11, a12, a22`` of each matrix, ``(N,)`` each."""
    a00, a01, a02, a11, a12, a22 = rows
    r0 = np.stack([a00 - value, a01, a02], axis=1)
    r1 = np.stack([a01, a11 - value, a12], axis=1)
    r2 = np.stack([a02, a12, a22 - value], axis=1)
    crosses = np.stack([_cross(r0, r1), _cross(r0, r2), _cross(r1, r2)], axis=1)  # (N, 3, 3)
    sq = np.einsum("nij,nij->ni", crosses, crosses)
    pick = np.where(sq[:, 1] > sq[:, 0], 1, 0)
    pick = np.where(sq[:, 2] > np.take_along_axis(sq, pick[:, None], 1)[:, 0], 2, pick)
    at = np.arange(len(pick))
    return crosses[at, pick] / np.sqrt(sq[at, pick])[:, None]


def _unit_pair(a: np.ndarray, b: np.ndarray, by_a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b) / |(a, b)|`` computed by dividing by the larger entry (``by_a``: ``|a| >= |b|``),
    as Open3D's closed-form eigenvector does (the same rounding)."""
    t = b / a
    pa = 1 / np.sqrt(1 + t * t)
    pb = t * pa
    t = a / b
    qb = 1 / np.sqrt(1 + t * t)
    qa = t * qb
    return np.where(by_a, pa, qa), np.where(by_a, pb, qb)


def _eigenvector1(rows: tuple[np.ndarray, ...], vec0: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Open3D's ``ComputeEigenvector1``: the eigenvector of ``value`` in the plane orthogonal
    to the eigenvector ``vec0 (N, 3)``."""
    a00, a01, a02, a11, a12, a22 = rows
    x, y, z = vec0[:, 0], vec0[:, 1], vec0[:, 2]
    zero = np.zeros_like(x)
    with np.errstate(divide="ignore", invalid="ignore"):  # the branch not taken may divide by 0
        inv_xz = 1 / np.sqrt(x * x + z * z)
        inv_yz = 1 / np.sqrt(y * y + z * z)
        u = np.where(
            (np.abs(x) > np.abs(y))[:, None],
            np.stack([-z * inv_xz, zero, x * inv_xz], axis=1),
            np.stack([zero, z * inv_yz, -y * inv_yz], axis=1),
        )
    v = _cross(vec0, u)

    def times_a(w: np.ndarray) -> np.ndarray:
        return np.stack(
            [
                a00 * w[:, 0] + a01 * w[:, 1] + a02 * w[:, 2],
                a01 * w[:, 0] + a11 * w[:, 1] + a12 * w[:, 2],
                a02 * w[:, 0] + a12 * w[:, 1] + a22 * w[:, 2],
            ],
            axis=1,
        )

    au, av = times_a(u), times_a(v)
    m00 = (u * au).sum(1) - value
    m01 = (u * av).sum(1)
    m11 = (v * av).sum(1) - value
    abs00, abs01, abs11 = np.abs(m00), np.abs(m01), np.abs(m11)
    with np.errstate(divide="ignore", invalid="ignore"):
        # |m00| >= |m11|: normalise (m00, m01) by its larger entry
        c00, c01 = _unit_pair(m00, m01, abs00 >= abs01)
        first = c01[:, None] * u - c00[:, None] * v
        # |m00| < |m11|: normalise (m11, m01)
        c11, c01 = _unit_pair(m11, m01, abs11 >= abs01)
        second = c11[:, None] * u - c01[:, None] * v
    upper = abs00 >= abs11
    out = np.where((upper & (np.maximum(abs00, abs01) > 0))[:, None], first, u)
    return np.where((~upper & (np.maximum(abs11, abs01) > 0))[:, None], second, out)


def _smallest_eigenvector(cov: np.ndarray) -> np.ndarray:
    """Open3D's ``FastEigen3x3``, vectorised: ``(N, 3, 3)`` symmetric matrices to the
    ``(N, 3)`` unit eigenvectors of their smallest eigenvalues, with Open3D's signs (zero rows
    for zero matrices). 1.4 ms for 4k matrices, 6 ms for 17k (``numpy.linalg.eigh``: 7 and
    18 ms)."""
    n = len(cov)
    out = np.zeros((n, 3))
    scale = cov.reshape(n, 9).max(axis=1)
    nonzero = scale != 0
    a = cov / np.where(nonzero, scale, 1.0)[:, None, None]
    a00, a01, a02 = a[:, 0, 0], a[:, 0, 1], a[:, 0, 2]
    a11, a12, a22 = a[:, 1, 1], a[:, 1, 2], a[:, 2, 2]
    off = a01 * a01 + a02 * a02 + a12 * a12
    # diagonal matrices: the axis of the strictly smallest entry, else z
    diagonal = nonzero & ~(off > 0)
    d0, d1, d2 = cov[:, 0, 0], cov[:, 1, 1], cov[:, 2, 2]
    on_x = (d0 < d1) & (d0 < d2)
    on_y = ~on_x & (d1 < d0) & (d1 < d2)
    out[diagonal] = np.eye(3)[np.where(on_x, 0, np.where(on_y, 1, 2))[diagonal]]
    g = np.flatnonzero(nonzero & (off > 0))
    rows = tuple(r[g] for r in (a00, a01, a02, a11, a12, a22))
    a00, a01, a02, a11, a12, a22 = rows
    off = off[g]
    q = (a00 + a11 + a22) / 3
    b00, b11, b22 = a00 - q, a11 - q, a22 - q
    p = np.sqrt((b00 * b00 + b11 * b11 + b22 * b22 + off * 2) / 6)
    c00 = b11 * b22 - a12 * a12
    c01 = a01 * b22 - a12 * a02
    c02 = a01 * a12 - b11 * a02
    half_det = np.clip((b00 * c00 - a01 * c01 + a02 * c02) / (p * p * p) * 0.5, -1.0, 1.0)
    angle = np.arccos(half_det) / 3.0
    beta2 = np.cos(angle) * 2
    beta0 = np.cos(angle + 2.09439510239319549) * 2
    beta1 = -(beta0 + beta2)
    e0, e1, e2 = q + p * beta0, q + p * beta1, q + p * beta2
    positive = half_det >= 0
    # Open3D starts from the eigenvalue farthest from the middle one: e2 when half_det >= 0
    vec_first = _eigenvector0(rows, np.where(positive, e2, e0))
    vec1 = _eigenvector1(rows, vec_first, e1)
    first_smallest = np.where(positive, (e2 < e0) & (e2 < e1), (e0 < e1) & (e0 < e2))
    one_smallest = (e1 < e0) & (e1 < e2)
    third = np.where(positive[:, None], _cross(vec1, vec_first), _cross(vec_first, vec1))
    out[g] = np.where(
        first_smallest[:, None], vec_first, np.where(one_smallest[:, None], vec1, third)
    )
    return out
