"""Which pairs of scans a map registers: its candidate edges.

- An unordered set, ``"all"``: every pair, ``K (K - 1) / 2`` registrations (the default; 45
  for 10 scans, 105 for 15).
- An unordered set, ``"knn"``: for every scan the ``neighbours`` others of the highest
  *overlap score*, the union of these pairs (at most ``K * neighbours``).
- A sequence (``sequence=True``): every consecutive pair (kind ``"sequence"``) and, as loop
  closure candidates (kind ``"loop"``), the non-consecutive pairs: all of them with ``"all"``,
  or with ``"knn"`` each scan's ``neighbours`` best by overlap score among its *revisits*
  (``revisit``, :func:`revisits`): the scans the sequence comes back to, whose path along the
  chained consecutive registrations is at least :data:`LOOP_DETOUR` times the distance between
  them and :data:`LOOP_MIN_PATH` of a scan's diagonal
  (:func:`pcreg.mapping.build.sequence_edges` registers the consecutive pairs first for it). A
  scan's best-scoring partners are otherwise the scans just before and after it (on a 10 Hz
  LiDAR drive, scans 2 and 3 frames away), which repeat what the consecutive pairs measure with
  correlated errors, and leave the place the sequence comes back to unregistered: that is no
  loop closure. On the KITTI excerpts of ``../shared/train_data`` (frames 3 apart, 1-14 m of
  road) the skip pairs' errors against the poses add up along the road like the consecutive
  pairs' (sequence 04: 3.5, 2.4 and 3.5 cm a step, 6.0 and 5.9 cm over two, 8.3 cm over three),
  so averaging them changed the APE by 0.01-0.85 cm either way (better on four excerpts, worse
  on four), noise against poses that ICP moves by 3.3 cm (BENCHMARKS.md, "Sequences").

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

__all__ = [
    "CANDIDATES",
    "LOOP_DETOUR",
    "LOOP_MIN_PATH",
    "candidate_pairs",
    "overlap_scores",
    "revisits",
]

#: the ways of choosing candidate pairs
CANDIDATES = ("all", "knn")

#: a loop candidate's path along the chain, in multiples of the distance between its scans:
#: at least twice as far round as straight across (on a circle, views more than about 217 deg
#: apart along the turn, 143 deg or less across; a drive that comes back; never two scans of
#: one straight road)
LOOP_DETOUR = 2.0
#: and at least this share of the median scan's bounding-box diagonal: a sensor that stands
#: still (or creeps) comes back to where it is at every scan, path and distance both near 0,
#: and its scans' pairs are what the consecutive ones measure. The views of a turntable's
#: loop travel 0.4-1.2 of it (generated objects, the Stanford dragon); a LiDAR sweep's
#: diagonal is 100-160 m, so a drive must go 10-16 m before it can come back
LOOP_MIN_PATH = 0.1

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


def revisits(clouds: Sequence[np.ndarray], steps: Sequence[np.ndarray | None]) -> np.ndarray:
    """``(K, K) bool``: the pairs of a sequence that are revisits (module docstring).

    Args:
        clouds: the ``K`` scans ``(N_k, 3)``, input units, each in its own frame.
        steps: ``K - 1`` consecutive registrations, ``steps[k - 1]`` = ``T_{k-1 <- k}``
            ``(4, 4)``, or None where the pair did not register (the chain breaks there).

    Each scan's place is its centroid carried into the frame of the first scan of its chain by
    the composed steps (a scan's own origin need not be where it was taken: a view moved by
    any rigid motion). Two scans of one chain are a revisit when the path through the places
    between them is at least :data:`LOOP_DETOUR` times the distance between their places and
    at least :data:`LOOP_MIN_PATH` of the median scan's diagonal; two scans on either side of
    a break are always one (nothing says they are close along the sequence). A scan is never
    its own revisit, nor its neighbour's.
    """
    from scipy.spatial.distance import cdist

    from pcreg.geometry.columns import column_max, column_min

    count = len(clouds)
    if len(steps) != count - 1:
        raise ValueError(f"{count} scans need {count - 1} steps, got {len(steps)}")
    chain = np.zeros(count, int)
    pose = np.eye(4)
    places = np.zeros((count, 3))
    for k in range(count):
        if k:
            step = steps[k - 1]
            if step is None:
                chain[k], pose = chain[k - 1] + 1, np.eye(4)
            else:
                chain[k], pose = chain[k - 1], pose @ np.asarray(step, np.float64)
        centroid = np.asarray(clouds[k], np.float64).mean(axis=0)
        places[k] = pose[:3, :3] @ centroid + pose[:3, 3]
    legs = np.linalg.norm(np.diff(places, axis=0), axis=1)
    travelled = np.concatenate([[0.0], np.cumsum(legs)])  # along the chain (within one)
    path = np.abs(travelled[:, None] - travelled[None, :])
    distance = cdist(places, places)
    diagonal = float(np.median([np.linalg.norm(column_max(c) - column_min(c)) for c in clouds]))
    came_back = (path >= LOOP_DETOUR * distance) & (path >= LOOP_MIN_PATH * diagonal)
    out = np.where(chain[:, None] == chain[None, :], came_back, True)
    index = np.arange(count)
    out &= np.abs(index[:, None] - index[None, :]) > 1
    return out


def candidate_pairs(
    clouds: Sequence[np.ndarray],
    *,
    sequence: bool = False,
    candidates: str = "all",
    neighbours: int = 5,
    revisit: np.ndarray | None = None,
    scores: np.ndarray | None = None,
) -> tuple[list[tuple[int, int, str]], np.ndarray | None]:
    """The candidate pairs of ``clouds`` (see the module docstring).

    Args:
        clouds: the ``K`` scans ``(N_k, 3)``, input units.
        sequence: the scans are in time order: consecutive pairs, then loop candidates.
        candidates: ``"all"`` or ``"knn"`` (:data:`CANDIDATES`).
        neighbours: with ``"knn"``, the best-scoring partners kept per scan.
        revisit: with ``sequence`` and ``"knn"``, the ``(K, K) bool`` pairs that may be loop
            candidates (:func:`revisits`); None: every non-consecutive pair may.
        scores: the ``(K, K)`` overlap scores where already computed (``"knn"``).

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
    if candidates == "all":
        scores = None
        for j in range(count):
            for i in range(j):
                chosen.setdefault((j, i), "loop" if sequence else "pair")
    else:
        scores = overlap_scores(clouds) if scores is None else scores
        for k in range(count):
            others = [m for m in np.argsort(-scores[k], kind="stable").tolist() if m != k]
            if sequence:  # loop closures: the consecutive pairs are in already
                others = [
                    m for m in others if abs(m - k) > 1 and (revisit is None or revisit[k, m])
                ]
            for m in others[:neighbours]:
                chosen.setdefault((max(k, m), min(k, m)), "loop" if sequence else "pair")
    pairs = sorted(((s, r, kind) for (s, r), kind in chosen.items()), key=lambda p: (p[1], p[0]))
    return pairs, scores
