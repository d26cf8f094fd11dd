"""The matching steps after the network, in numpy: superpoint (coarse) matching (GeoTransformer
§3.3), the patch pairs of the superpoint correspondences, and the dense correspondences read
from the optimal-transport log assignment (§3.4).

Each function computes what its torch original computes (:mod:`pcreg.models.geotransformer.
superpoint_matching`, :mod:`~pcreg.models.geotransformer.point_matching`,
:class:`~pcreg.models.geotransformer.matcher.Matcher`), with the same operations in the same
dtype (float32 for the network's outputs), for one pair. No torch import.

Where the two can differ:

- ``exp`` of float32 is evaluated in float64 and rounded to float32. numpy's own float32
  ``exp`` (its SIMD kernel) differs from torch's in the last bit for ~40 % of arguments; the
  rounded float64 value agrees with torch's for ~99 % (torch's is within 1 ulp of the correctly
  rounded one, as is this).
- Sums and matrix products run in float32 as in torch, but in numpy's / OpenBLAS's order
  rather than torch's / MKL's: results agree to a few ulp, not bit for bit.
- Top-k among exactly equal scores: torch's CPU ``topk`` orders ties by whatever its
  selection algorithm (``std::nth_element`` / ``std::partial_sort``) leaves, which depends on
  the data; here ties are broken by the lower index (flat row-major index for
  :func:`superpoint_matching`, the index along the reduced axis for
  :func:`mutual_topk_correspondences`). Continuous scores do not tie; zero scores (padded or
  dropped entries) tie, but never pass a ``confidence_threshold >= 0``, so for the mask only
  ties among positive scores at the k-th place could differ.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "PatchPairs",
    "correspondences",
    "exp_or_zero",
    "gather_patches",
    "mutual_topk_correspondences",
    "superpoint_matching",
]

# Below this, exp() is taken as exactly 0 (e^-80 ~ 2e-35), as in the torch exp_or_zero.
_EXP_FLOOR = -80.0
# F.normalize's eps: the smallest norm a feature is divided by.
_NORM_EPS = 1e-12
# the clamp of the dual normalisation's row / column sums
_SUM_EPS = 1e-12


def exp_or_zero(x: ArrayLike) -> NDArray[np.floating]:
    """``exp(x)`` with every entry below -80 mapped to exactly 0 (the torch ``exp_or_zero``).

    The zeros matter beyond speed: an entry of log probability -85 is ~1e-37 through ``exp``
    but 0 here, so it does not pass a ``confidence_threshold`` of 0 (``prob > 0``), as in
    torch. Entries at exactly -80 keep ``exp(-80)``; NaN stays NaN. Same shape and dtype;
    float32 is evaluated in float64 and rounded (see the module docstring).
    """
    x = np.asarray(x)
    work = np.float64 if x.dtype == np.float32 else x.dtype
    out = np.maximum(x, _EXP_FLOOR, dtype=work)
    with np.errstate(over="ignore"):
        np.exp(out, out=out)
    out = out.astype(x.dtype, copy=False)
    out[x < _EXP_FLOOR] = 0.0
    return out


def _exp(x: NDArray[np.floating]) -> NDArray[np.floating]:
    """``exp(x)`` in ``x``'s dtype; float32 through float64 (see the module docstring)."""
    if x.dtype == np.float32:
        with np.errstate(over="ignore"):
            return np.exp(x.astype(np.float64)).astype(np.float32)
    return np.exp(x)


def _normalize(x: NDArray[np.floating]) -> NDArray[np.floating]:
    """Rows divided by their L2 norm clamped to >= 1e-12 (``torch.nn.functional.normalize``)."""
    norm = np.sqrt(np.sum(x * x, axis=-1, keepdims=True))
    return x / np.maximum(norm, _NORM_EPS)


def _topk_desc(values: NDArray[np.floating], k: int) -> NDArray[np.int64]:
    """Indices of the ``k`` largest of 1-D ``values``, largest first, ties by lower index
    (NaN counts as the largest, as in torch's ``topk``)."""
    values = np.where(np.isnan(values), np.inf, values)
    n = values.shape[0]
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k < n:
        # every entry >= the k-th largest (ties included), then a stable sort among those
        kth = np.partition(values, n - k)[n - k]
        candidates = np.flatnonzero(values >= kth)
    else:
        candidates = np.arange(n)
    order = np.argsort(-values[candidates], kind="stable")[:k]
    return candidates[order].astype(np.int64)


def superpoint_matching(
    src_feats: ArrayLike,
    ref_feats: ArrayLike,
    src_valid: ArrayLike,
    ref_valid: ArrayLike,
    num_correspondences: int,
    dual_normalization: bool = True,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.floating]]:
    """Top-k superpoint correspondences of one pair by (dual-normalised) feature similarity.

    s_ij = exp(-|f_i - g_j|²) on L2-normalised features (computed as ``max(2 - 2 f.g, 0)``);
    with dual normalisation s_ij ← (s_ij / Σ_k s_ik)(s_ij / Σ_k s_kj). Rows are the
    reference superpoints, columns the source ones, as in torch.

    Args:
        src_feats ``(M, C)``, ref_feats ``(N, C)``: superpoint features, float32 (normalised
            here).
        src_valid ``(M,)``, ref_valid ``(N,)``: bool, superpoints that may match.
        num_correspondences: k (256 in GeoTransformer); fewer when fewer valid pairs exist.
        dual_normalization: apply the dual normalisation.
    Returns:
        ``src_indices (k,)``, ``ref_indices (k,)`` int64 and ``scores (k,)`` in the features'
        dtype, best first; ties (exactly equal scores) by the lower flat index
        ``ref * M + src``.
    """
    src = _normalize(np.asarray(src_feats))
    ref = _normalize(np.asarray(ref_feats))
    src_valid = np.asarray(src_valid, dtype=bool)
    ref_valid = np.asarray(ref_valid, dtype=bool)
    sq = np.maximum(2.0 - 2.0 * (ref @ src.T), 0.0)
    sim = _exp(-sq)
    pair_valid = ref_valid[:, None] & src_valid[None, :]
    sim = sim * pair_valid
    if dual_normalization:
        row = sim / np.maximum(sim.sum(axis=1, keepdims=True), _SUM_EPS)
        col = sim / np.maximum(sim.sum(axis=0, keepdims=True), _SUM_EPS)
        sim = row * col
    k = min(num_correspondences, int(pair_valid.sum()))
    flat_sim = sim.reshape(-1)
    flat = _topk_desc(flat_sim, k)
    m = src.shape[0]
    if flat.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), flat_sim[:0].copy()
    return flat % m, flat // m, flat_sim[flat]


@dataclass(frozen=True)
class PatchPairs:
    """The patches of one pair's superpoint correspondences, gathered (P pairs, K points each).

    ``src_points`` / ``ref_points`` ``(P, K, 3)`` float32 patch points in metres (zeros where
    invalid), ``src_valid`` / ``ref_valid`` ``(P, K)`` bool, ``src_feats`` / ``ref_feats``
    ``(P, K, C)`` fine features (zeros where invalid).
    """

    src_points: NDArray[np.floating]
    ref_points: NDArray[np.floating]
    src_valid: NDArray[np.bool_]
    ref_valid: NDArray[np.bool_]
    src_feats: NDArray[np.floating]
    ref_feats: NDArray[np.floating]


def gather_patches(
    src_idx: ArrayLike,
    ref_idx: ArrayLike,
    *,
    src_knn_indices: ArrayLike,
    src_knn_points: ArrayLike,
    src_knn_valid: ArrayLike,
    src_fine: ArrayLike,
    ref_knn_indices: ArrayLike,
    ref_knn_points: ArrayLike,
    ref_knn_valid: ArrayLike,
    ref_fine: ArrayLike,
) -> PatchPairs:
    """The patch pairs of one pair's superpoint correspondences with their fine features
    (``Matcher.gather_patches`` for a single pair).

    Args:
        src_idx ``(P,)``, ref_idx ``(P,)``: int superpoint correspondences (from
            :func:`superpoint_matching`).
        src_knn_indices ``(M, K)`` / ref_knn_indices ``(N, K)``: int indices of each
            superpoint's patch into the fine points, the shadow index ``N_f`` (the number of
            fine points) where a patch is short.
        src_knn_points ``(M, K, 3)`` / ref_knn_points ``(N, K, 3)``: the patch points in
            metres, zeros where invalid.
        src_knn_valid ``(M, K)`` / ref_knn_valid ``(N, K)``: bool, real patch points.
        src_fine ``(N_f, C)`` / ref_fine: fine-level features of the cloud's points.
    Returns:
        :class:`PatchPairs` with P rows; features at the shadow index are zeros.
    """
    si = np.asarray(src_idx, dtype=np.int64)
    ri = np.asarray(ref_idx, dtype=np.int64)

    def feats(fine: ArrayLike, knn: ArrayLike, idx: NDArray[np.int64]) -> NDArray[np.floating]:
        fine = np.asarray(fine)
        padded = np.concatenate([fine, np.zeros((1, fine.shape[1]), dtype=fine.dtype)], 0)
        return padded[np.asarray(knn)[idx]]

    return PatchPairs(
        src_points=np.asarray(src_knn_points)[si],
        ref_points=np.asarray(ref_knn_points)[ri],
        src_valid=np.asarray(src_knn_valid, dtype=bool)[si],
        ref_valid=np.asarray(ref_knn_valid, dtype=bool)[ri],
        src_feats=feats(src_fine, src_knn_indices, si),
        ref_feats=feats(ref_fine, ref_knn_indices, ri),
    )


def _topk_mask(scores: NDArray[np.floating], k: int, axis: int) -> NDArray[np.bool_]:
    """Bool mask of the ``k`` largest entries along ``axis`` (ties: the lower index; NaN
    counts as the largest, as in torch's ``topk``)."""
    if k <= 0:
        return np.zeros(scores.shape, dtype=bool)
    if np.isneginf(scores).any():
        # -inf is the "taken" marker below; with -inf among the scores sort instead
        key = np.where(np.isnan(scores), -np.inf, -scores)
        top = np.take(np.argsort(key, axis=axis, kind="stable"), np.arange(k), axis=axis)
        mask = np.zeros(scores.shape, dtype=bool)
        np.put_along_axis(mask, top, True, axis=axis)
        return mask
    # k rounds of argmax (its first maximum is the lower index; NaN counts as the largest),
    # each taken entry then set to -inf: ~2x faster than an argsort for the small k used
    work = np.moveaxis(scores, axis, -1)
    shape = work.shape
    n = shape[-1]
    work = work.reshape(-1, n).copy()
    flat_work = work.reshape(-1)
    rows = np.arange(work.shape[0]) * n
    flat_mask = np.zeros(work.size, dtype=bool)
    for _ in range(k):
        pick = rows + np.argmax(work, axis=1)
        flat_mask[pick] = True
        flat_work[pick] = -np.inf
    return np.moveaxis(flat_mask.reshape(shape), -1, axis)


def mutual_topk_correspondences(
    scores: ArrayLike,
    src_valid: ArrayLike,
    ref_valid: ArrayLike,
    k: int,
    confidence_threshold: float,
    mutual: bool = True,
) -> NDArray[np.bool_]:
    """Correspondence mask of patch pairs from their assignment probabilities.

    Entry (p, r, s) is kept when s is among row r's top-k and (``mutual``) r among column
    s's top-k (without ``mutual``: either), its probability exceeds
    ``confidence_threshold`` (strictly), and both points are real.

    Args:
        scores ``(P, K_ref, K_src)``: assignment probabilities, float32 (:func:`exp_or_zero`
            of the log assignment without the dustbins).
        src_valid ``(P, K_src)``, ref_valid ``(P, K_ref)``: bool, real patch points (the
            scores' columns and rows).
        k: top-k per row / column (3 for 3DMatch, 2 for KITTI); at most the axis length.
        confidence_threshold: lowest probability kept (exclusive).
        mutual: require both directions.
    Returns:
        ``(P, K_ref, K_src)`` bool.
    """
    scores = np.asarray(scores)
    kr = min(k, scores.shape[2])
    kc = min(k, scores.shape[1])
    row_top = _topk_mask(scores, kr, axis=2)
    col_top = _topk_mask(scores, kc, axis=1)
    confident = scores > confidence_threshold
    selected = (row_top & col_top) if mutual else (row_top | col_top)
    src_valid = np.asarray(src_valid, dtype=bool)
    ref_valid = np.asarray(ref_valid, dtype=bool)
    return selected & confident & ref_valid[:, :, None] & src_valid[:, None, :]


def correspondences(
    log_assign: ArrayLike,
    patches: PatchPairs,
    topk: int,
    confidence_threshold: float,
    mutual: bool = True,
) -> tuple[NDArray[np.floating], NDArray[np.floating], NDArray[np.floating], NDArray[np.int64]]:
    """Mutual top-k confident matches of every patch pair, flattened
    (``Matcher.correspondences`` for a single pair).

    Args:
        log_assign ``(P, K_ref + 1, K_src + 1)``: float32 log assignment with dustbins
            (reference rows, source columns), the optimal transport's output.
        patches: the :class:`PatchPairs` the assignment was computed on.
        topk, confidence_threshold, mutual: as in :func:`mutual_topk_correspondences`.
    Returns:
        ``src_points (C, 3)``, ``ref_points (C, 3)`` in metres, ``scores (C,)`` (the
        assignment probabilities) and ``patch (C,)`` int64, the patch pair of each; rows in
        row-major order of ``(patch, ref point, src point)``, as torch's ``nonzero``.
    """
    log_assign = np.asarray(log_assign)
    prob = exp_or_zero(log_assign[:, :-1, :-1])
    corr = mutual_topk_correspondences(
        prob,
        src_valid=patches.src_valid,
        ref_valid=patches.ref_valid,
        k=topk,
        confidence_threshold=confidence_threshold,
        mutual=mutual,
    )
    p_idx, r_idx, s_idx = np.nonzero(corr)
    return (
        patches.src_points[p_idx, s_idx],
        patches.ref_points[p_idx, r_idx],
        prob[p_idx, r_idx, s_idx],
        p_idx.astype(np.int64),
    )
