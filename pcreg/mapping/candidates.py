"""Which pairs of scans a map registers: its candidate edges.

- An unordered set, ``"all"``: every pair, ``K (K - 1) / 2`` registrations (the default; 45
  for 10 scans, 105 for 15).
- An unordered set, ``"knn"``: for every scan the ``neighbours`` others of the highest
  *overlap score*, the union of these pairs (at most ``K * neighbours``).
- A sequence (``sequence=True``): every consecutive pair (kind ``"sequence"``) and, as loop
  closure candidates (kind ``"loop"``), the non-consecutive pairs: all of them with
  ``"all"``, or each scan's ``neighbours`` best by overlap score with ``"knn"``.

The overlap score (:func:`overlap_scores`) is a cheap stand-in for registration: both scans are
thinned to a common voxel (a fortieth of the median scan's bounding-box diagonal), described by
Open3D's FPFH (33 bins, rotation invariant: the scans may be in any pose), and the score is the
share of mutual nearest neighbours in feature space among the smaller scan's points. Views that
overlap share local shapes; it ranks, it does not decide (every candidate is still registered
and verified). Cheap per pair, not per set: it compares every pair of scans, K(K-1)/2 feature
searches, so it suits tens to a few hundred scans; a long drive (thousands of scans) needs
candidates near the chained trajectory or a descriptor index instead (not built).

Every pair is ``(src, ref, kind)`` with ``src`` the later scan in input order and ``ref`` the
earlier one, as odometry registers scan k onto scan k-1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["CANDIDATES", "candidate_pairs", "overlap_scores"]

#: the ways of choosing candidate pairs
CANDIDATES = ("all", "knn")

#: the overlap score's voxel, as a fraction of the median scan's bounding-box diagonal
SCORE_VOXEL_FRACTION = 1 / 40


def _features(clouds: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``(n_k, 33) float64`` FPFH of each cloud thinned to the common score voxel."""
    import open3d as o3d

    reg = o3d.pipelines.registration
    diagonal = float(np.median([np.linalg.norm(np.ptp(c, axis=0)) for c in clouds]))
    voxel = max(diagonal * SCORE_VOXEL_FRACTION, 1e-12)
    out = []
    for cloud in clouds:
        pc = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(cloud, np.float64)))
        pc = pc.voxel_down_sample(voxel)
        pc.estimate_normals(o3d.geometry.KDTreeSearchParamHybrid(radius=2 * voxel, max_nn=30))
        fpfh = reg.compute_fpfh_feature(
            pc, o3d.geometry.KDTreeSearchParamHybrid(radius=5 * voxel, max_nn=100)
        )
        out.append(np.asarray(fpfh.data, np.float64).T)
    return out


def overlap_scores(clouds: Sequence[np.ndarray]) -> np.ndarray:
    """``(K, K) float64`` symmetric overlap scores in [0, 1] (see the module docstring); the
    diagonal is 0."""
    from scipy.spatial import cKDTree

    features = _features(clouds)
    trees = [cKDTree(f) for f in features]
    count = len(clouds)
    scores = np.zeros((count, count))
    for i in range(count):
        for j in range(i + 1, count):
            a, b = features[i], features[j]
            if not len(a) or not len(b):
                continue
            ab = trees[j].query(a)[1]  # nearest of b for each of a
            ba = trees[i].query(b)[1]
            mutual = int(np.sum(ba[ab] == np.arange(len(a))))
            scores[i, j] = scores[j, i] = mutual / min(len(a), len(b))
    return scores


def candidate_pairs(
    clouds: Sequence[np.ndarray],
    *,
    sequence: bool = False,
    candidates: str = "all",
    neighbours: int = 5,
) -> tuple[list[tuple[int, int, str]], np.ndarray | None]:
    """The candidate pairs of ``clouds`` (see the module docstring).

    Args:
        clouds: the ``K`` scans ``(N_k, 3)``, input units.
        sequence: the scans are in time order: consecutive pairs, then loop candidates.
        candidates: ``"all"`` or ``"knn"`` (:data:`CANDIDATES`).
        neighbours: with ``"knn"``, the best-scoring partners kept per scan.

    Returns:
        ``[(src, ref, kind)]`` sorted by ``(ref, src)``, and the ``(K, K)`` overlap scores
        (``"knn"`` only; None for ``"all"``).

    Raises:
        InputError: an unknown ``candidates`` or ``neighbours`` under 1.
    """
    from pcreg.errors import InputError

    if candidates not in CANDIDATES:
        raise InputError("candidates", f"expected one of {', '.join(CANDIDATES)}, got "
                         f"{candidates!r}")  # fmt: skip
    if neighbours < 1:
        raise InputError("neighbours", f"must be at least 1, got {neighbours}")
    count = len(clouds)
    chosen: dict[tuple[int, int], str] = {}
    if sequence:
        chosen.update({(k, k - 1): "sequence" for k in range(1, count)})
    scores = None
    if candidates == "all":
        for j in range(count):
            for i in range(j):
                chosen.setdefault((j, i), "loop" if sequence else "pair")
    else:
        scores = overlap_scores(clouds)
        for k in range(count):
            others = [m for m in np.argsort(-scores[k], kind="stable").tolist() if m != k]
            if sequence:  # loop closures: the consecutive pairs are in already
                others = [m for m in others if abs(m - k) > 1]
            for m in others[:neighbours]:
                chosen.setdefault((max(k, m), min(k, m)), "loop" if sequence else "pair")
    pairs = sorted(((s, r, kind) for (s, r), kind in chosen.items()), key=lambda p: (p[1], p[0]))
    return pairs, scores
