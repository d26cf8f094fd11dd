"""What a run of Open3D's correspondence RANSAC will cost, predicted from the pairs alone.

Each iteration of ``registration_ransac_based_on_correspondence`` draws three
correspondences and runs the checkers (edge length 0.9, then the 1.5-voxel distance after
the three-point fit); a sample that passes is validated against every correspondence. The
time of an iteration is therefore about ``a + b * share * n`` for ``n`` correspondences of
which a sample passes with probability ``share``. Where every sample passes (an object
against its mirror image: a triangle and its mirror image are congruent; a floor, where
every sample slides) the validations dominate and a 100,000-iteration run takes seconds
with nothing to find.

The share is estimated on :data:`SHARE_SAMPLES` seeded samples by the same two checks in
numpy, so the iteration cap that follows from it (:func:`iteration_cap`) is the same on
every machine and under any load: a pair's result depends on its clouds and its seed only.
(A cap from a timed run did not: the suite's room pair took 28 us per iteration idle and
over the 80 us line on a loaded machine, and so got another FPFH pose.)
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "ITERATION_S",
    "MIN_ITERATIONS",
    "SHARE_SAMPLES",
    "SLOW_ITERATION_S",
    "VALIDATION_S",
    "checker_pass_share",
    "iteration_cap",
    "predicted_iteration_s",
    "samples_pass",
]

#: seeded 3-correspondence samples whose checks estimate the share that passes
SHARE_SAMPLES = 2000
#: seconds of an iteration whose sample fails the checkers (three draws, a three-point fit),
#: however many correspondences there are, and
ITERATION_S = 15e-6
#: seconds per correspondence of each validation (a sample that passed the checkers). Fitted to
#: 2,000-iteration runs (confidence 1, medians of 3; ``python tools/ransac_cost_fit.py``) on the
#: 2-core AMD EPYC, nothing else running, measured / predicted in us per iteration: the suite's room
#: pairs 22 / 15 and 18 / 23 (15.7k matches, a share of 0.000-0.001), the 3DMatch demo pair 10 / 23,
#: it against its mirror image 247 / 234 (share 0.111), the bunny's mesh against its mirror image
#: 214 / 204 (0.201), two bunny range scans at 4 m 116 / 141 (7,440 matches, 0.034), KITTI 94-95 at
#: 0.3 m 110 / 110 (17k matches, 0.011) and 41 / 33 at 5,000 queries. Every pair falls on the same
#: side of :data:`SLOW_ITERATION_S` measured and predicted. (Without a validation an iteration's
#: cost does not grow with the matches: a term per match and iteration capped a 100k-match pair
#: whose samples never pass.)
VALIDATION_S = 0.5e-6
#: a predicted iteration this slow pays for a validation nearly every time; a run is capped
#: only above it (the line the timed cap before this one drew)
SLOW_ITERATION_S = 80e-6
#: a capped run keeps at least this many iterations
MIN_ITERATIONS = 1000


def checker_pass_share(
    src: np.ndarray,
    ref: np.ndarray,
    corres: np.ndarray,
    distance: float,
    *,
    edge_similarity: float = 0.9,
    samples: int = SHARE_SAMPLES,
    seed: int = 0,
) -> float:
    """The share of random 3-correspondence samples that pass RANSAC's two checkers.

    Args:
        src, ref: ``(N, 3)`` / ``(M, 3) float64`` the downsampled clouds, metres.
        corres: ``(K, 2) int`` source and reference indices of the matched features.
        distance: the inlier distance, metres (each of the three points within it after
            the three-point rigid fit).
        edge_similarity: each edge of the triangle at least this times its counterpart
            (Open3D's ``CorrespondenceCheckerBasedOnEdgeLength``).
        samples, seed: the samples drawn (with replacement), seeded.

    Returns:
        the share in [0, 1]; 0.0 without correspondences.
    """
    corres = np.asarray(corres, dtype=np.int64).reshape(-1, 2)
    if len(corres) == 0 or samples < 1:
        return 0.0
    tri = corres[np.random.default_rng(abs(int(seed))).integers(0, len(corres), (samples, 3))]
    return float(samples_pass(src, ref, tri, distance, edge_similarity).mean())


def samples_pass(
    src: np.ndarray, ref: np.ndarray, tri: np.ndarray, distance: float, edge_similarity: float
) -> np.ndarray:
    """``(S,) bool``: whether each sample ``tri (S, 3, 2)`` (three source / reference index
    pairs) passes the edge-length and the distance checks (see :func:`checker_pass_share`);
    a sample with a non-finite point does not."""
    samples = len(tri)
    p, q = src[tri[..., 0]], ref[tri[..., 1]]  # (S, 3, 3): three points each
    ok = np.isfinite(p).all(axis=(1, 2)) & np.isfinite(q).all(axis=(1, 2))
    p, q = np.where(ok[:, None, None], p, 0.0), np.where(ok[:, None, None], q, 0.0)
    for a, b in ((0, 1), (1, 2), (2, 0)):
        ds = np.linalg.norm(p[:, a] - p[:, b], axis=1)
        dt = np.linalg.norm(q[:, a] - q[:, b], axis=1)
        ok &= ~((ds < dt * edge_similarity) | (dt < ds * edge_similarity))
    # the rigid fit of each triangle (Kabsch, without reflection), as Open3D's estimation
    pm, qm = p.mean(axis=1), q.mean(axis=1)
    h = np.einsum("sia,sib->sab", p - pm[:, None], q - qm[:, None])
    u, _, vt = np.linalg.svd(h)
    flip = np.ones((samples, 3))
    flip[:, 2] = np.sign(np.linalg.det(np.einsum("sba,scb->sac", vt, u)))
    rot = np.einsum("sba,sb,scb->sac", vt, flip, u)  # V diag(1, 1, d) U^T
    moved = np.einsum("sab,sib->sia", rot, p - pm[:, None]) + qm[:, None]
    ok &= (np.linalg.norm(moved - q, axis=2) <= distance).all(axis=1)
    return ok


def predicted_iteration_s(matches: int, share: float) -> float:
    """Seconds per RANSAC iteration over ``matches`` correspondences of which a sample
    passes the checkers with probability ``share`` (:data:`ITERATION_S`,
    :data:`VALIDATION_S`)."""
    return ITERATION_S + share * matches * VALIDATION_S


def iteration_cap(matches: int, share: float, max_iterations: int, budget_s: float) -> int:
    """RANSAC's iteration cap: ``max_iterations``, unless the predicted iteration
    (:func:`predicted_iteration_s`) is over :data:`SLOW_ITERATION_S` and the whole run would
    exceed ``budget_s``; then the iterations that fit the budget (at least
    :data:`MIN_ITERATIONS`). Depends on its arguments only, never on the machine."""
    each = predicted_iteration_s(matches, share)
    if max_iterations <= MIN_ITERATIONS:
        return max_iterations
    if each <= SLOW_ITERATION_S or each * max_iterations <= budget_s:
        return max_iterations
    return max(MIN_ITERATIONS, int(budget_s / each))
