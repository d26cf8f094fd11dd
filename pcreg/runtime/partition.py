"""Point-to-node partition in numpy: the patches around superpoints (GeoTransformer §3.4); the
k-d tree is :class:`pcreg.geometry.clouds.KdTree`.

:func:`point_to_node_partition` is :func:`pcreg.ops.partition.point_to_node_partition` without
torch: every point joins its nearest node (superpoint), and each node keeps the ``point_limit``
assigned points nearest to it. Distances are float64 direct differences, so the result is
the torch function's wherever that one's float32 distances (a matrix product about the nodes'
mean) do not reorder two distances within their rounding error; exact ties go to the lower
index (the nearest node of a point, and the order within a patch).
"""

from __future__ import annotations

import numpy as np

from pcreg.geometry.clouds import KdTree

__all__ = ["patch_points", "point_to_node_partition"]

#: nodes a KD-tree proposes per point; the nearest is chosen among them by exact distance
_CANDIDATES = 4


def point_to_node_partition(
    points: np.ndarray, nodes: np.ndarray, point_limit: int, valid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Assign every point to its nearest node; each node keeps its ``point_limit`` nearest
    assigned points (its patch), nearest first.

    Args:
        points: ``(N, 3)`` float, the fine points of one cloud (metres).
        nodes: ``(M, 3)`` float, its superpoints (metres).
        point_limit: patch size ``K`` (>= 1; 32 for the indoor model, 128 for the outdoor one).
        valid: optional ``(N,)`` bool mask of real points (the others never join a patch).

    Returns:
        ``node_valid (M,)`` bool (non-empty patch), ``knn_indices (M, K)`` int64 into
        ``points`` (shadow ``N`` where the patch is short), ``knn_valid (M, K)`` bool.
    """
    pts = np.asarray(points, dtype=np.float64)
    nds = np.asarray(nodes, dtype=np.float64)
    for name, x in (("points", pts), ("nodes", nds)):
        if x.ndim != 2 or x.shape[1] != 3:
            raise ValueError(f"{name} must be (N, 3), got {x.shape}")
    if int(point_limit) < 1:
        raise ValueError(f"point_limit must be >= 1, got {point_limit}")
    limit = int(point_limit)
    n, m = pts.shape[0], nds.shape[0]
    knn_indices = np.full((m, limit), n, dtype=np.int64)
    knn_valid = np.zeros((m, limit), dtype=bool)
    member = np.arange(n)
    if valid is not None:
        valid = np.asarray(valid, dtype=bool)
        if valid.shape != (n,):
            raise ValueError(f"valid must be ({n},), got {valid.shape}")
        member = member[valid]
    if member.size == 0 or m == 0:
        return np.zeros(m, dtype=bool), knn_indices, knn_valid
    # The nearest few nodes from a KD-tree, their squared distances by direct differences, and
    # the nearest of them, the lowest node index on an exact tie (as an argmin would).
    k = min(_CANDIDATES, m)
    _, cand = KdTree(nds).query(pts[member], k=k)
    cand = cand.reshape(member.size, k)
    sq = np.square(pts[member, None, :] - nds[cand]).sum(axis=-1)  # (P, k)
    dist = sq.min(axis=1)
    assignment = np.where(sq == dist[:, None], cand, m).min(axis=1)
    # Grouped by node, nearest first, lower point index first on ties (member is ascending).
    order = np.lexsort((member, dist, assignment))
    node_of = assignment[order]
    counts = np.bincount(assignment, minlength=m)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.arange(order.size) - starts[node_of]
    keep = rank < limit
    knn_indices[node_of[keep], rank[keep]] = member[order[keep]]
    knn_valid[node_of[keep], rank[keep]] = True
    return counts > 0, knn_indices, knn_valid


def patch_points(points: np.ndarray, knn_indices: np.ndarray) -> np.ndarray:
    """The points of every patch, zeros where the patch is short (like ``Patches.knn_points``).

    Args:
        points: ``(N, 3)`` float, the fine points (metres).
        knn_indices: ``(M, K)`` int64 into ``points``, shadow ``N`` (from
            :func:`point_to_node_partition`).

    Returns:
        ``(M, K, 3)`` in the dtype of ``points``.
    """
    pts = np.asarray(points)
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise ValueError(f"points must be (N, 3), got {pts.shape}")
    padded = np.concatenate([pts, np.zeros((1, 3), dtype=pts.dtype)], axis=0)
    return padded[np.asarray(knn_indices)]
