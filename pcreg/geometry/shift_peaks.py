"""Other places a cloud fits at a fixed orientation: the peaks of the occupancy
cross-correlation over all translations.

A scene with repeated structure (a row of identical shelves, tiles, windows, parking bays) can
lay a scan on the wrong copy: the orientation is right, the place is not, and the fit is
perfect there too. The symmetry probe (:func:`pcreg.registration.symmetry.symmetry_probe`)
turns the source and never shifts it, so it cannot see the other copy. This module finds the
translations worth trying: with the source at the estimate's orientation, the cross-correlation
of the two clouds' occupancy grids (FFTs, as :mod:`pcreg.geometry.cube_ranking` ranks its
rotations; Kuglin & Hines 1975 without the phase normalisation) counts, for every translation
on the grid, how many source cells land on reference cells; its highest local peaks away from
the estimate are the starts.

A point goes to one of three channels, the coordinate axis its normal is closest to (sign-free:
two partial views orient their normals towards different centroids), and each channel pair is
normalised by the geometric mean of its two sizes, so that a floor sliding over a floor does not
outvote a shelf landing on a shelf.
"""

from __future__ import annotations

import numpy as np

from pcreg.geometry.columns import column_min
from pcreg.geometry.cube_ranking import next_fast_len

__all__ = ["SHIFT_CELLS", "shift_cell", "translation_peaks"]

#: cells along the larger cloud's longest side (the grid is about twice that per axis): the
#: correlation's resolution. 24 keeps the three channels' transforms to a few milliseconds;
#: the peaks are starts for ICP, which finds the exact place.
SHIFT_CELLS = 24


def shift_cell(src: np.ndarray, ref: np.ndarray, voxel: float) -> float:
    """The grid cell: the longest side of either cloud over :data:`SHIFT_CELLS`, at least
    2 ``voxel`` (same units as the points)."""
    span = max(float(np.ptp(src, 0).max()), float(np.ptp(ref, 0).max()))
    return max(2.0 * voxel, span / SHIFT_CELLS)


def _channels(normals: np.ndarray) -> np.ndarray:
    return np.abs(np.asarray(normals)).argmax(1)


def _grid(idx: np.ndarray, channels: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    """``(3, *shape)`` float32 occupancy, each channel scaled by ``1 / sqrt(its cells)``."""
    grid = np.zeros((3, *shape), np.float32)
    grid[channels, idx[:, 0], idx[:, 1], idx[:, 2]] = 1.0
    grid *= (1.0 / np.sqrt(np.maximum(grid.sum((1, 2, 3)), 1.0)))[:, None, None, None]
    return grid


def translation_peaks(
    src: np.ndarray,
    src_normals: np.ndarray,
    ref: np.ndarray,
    ref_normals: np.ndarray,
    cell: float,
    count: int = 6,
    min_shift: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Translations ``(K, 3)``, ``K <= count``, best first, that lay ``src`` on ``ref`` about
    as well as anywhere: the highest local maxima (over the 26 neighbouring cells) of the
    channel-normalised occupancy cross-correlation (module doc) above 5 % of its peak, each
    at least ``min_shift`` long and more than 2 cells from the estimate's own cells (no
    translation) and from every one kept before it. None where nothing overlaps anywhere or
    the clouds do not touch at the estimate.

    Args:
        src ``(N, 3)``, src_normals ``(N, 3)``: the source already at the estimate (its
            normals turned with it).
        ref ``(M, 3)``, ref_normals ``(M, 3)``: the reference, same units.
        cell: the grid cell (:func:`shift_cell`); a peak is found to within about one cell.
        count: the most translations returned.
        min_shift: the least length of a translation returned (the estimate's own peak and
            its shoulders are not other places).

    Returns:
        The translations ``(K, 3)`` and their strengths ``(K,)``: each peak's correlation
        over the correlation at no translation (the best of the 8 cells around it); about 1
        or more for another place that overlaps as much as the estimate.
    """
    src = np.asarray(src, np.float64)
    ref = np.asarray(ref, np.float64)
    if len(src) == 0 or len(ref) == 0 or count <= 0:
        return np.zeros((0, 3)), np.zeros(0)
    lo_s, lo_r = column_min(src), column_min(ref)
    idx_s = np.floor((src - lo_s) / cell).astype(np.int64)
    idx_r = np.floor((ref - lo_r) / cell).astype(np.int64)
    size_s, size_r = idx_s.max(0) + 1, idx_r.max(0) + 1
    # cyclic correlation equals the linear one on a grid at least as long as both together
    shape = tuple(next_fast_len(int(a + b)) for a, b in zip(size_s, size_r, strict=True))
    spec_s = np.fft.rfftn(_grid(idx_s, _channels(src_normals), shape), axes=(1, 2, 3))
    spec_r = np.fft.rfftn(_grid(idx_r, _channels(ref_normals), shape), axes=(1, 2, 3))
    corr = np.fft.irfftn((spec_s.conj() * spec_r).sum(0), s=shape, axes=(0, 1, 2))
    # corr[k] = sum_i src(i) ref(i + k): the source shifted by lo_r - lo_s + k cells, with k
    # from -(size_s - 1) to size_r - 1 (a negative k wraps to the end of its axis)
    shape_arr = np.array(shape)
    local = corr
    for axis in range(3):  # the 3x3x3 neighbourhood's maximum, one axis at a time (cyclic)
        local = np.maximum(local, np.maximum(np.roll(local, 1, axis), np.roll(local, -1, axis)))
    peak = float(corr.max())
    if peak <= 1e-6:  # no channel in common: nothing overlaps anywhere
        return np.zeros((0, 3)), np.zeros(0)
    flats = np.flatnonzero((corr >= local) & (corr > 0.05 * peak))
    flats = flats[np.argsort(corr.flat[flats])[::-1]]
    base = lo_r - lo_s
    # the estimate itself: no translation, k = -base / cell (between the 8 cells around it)
    at = -base / cell
    if np.any(at < -size_s) or np.any(at > size_r):  # the clouds do not touch at the estimate
        return np.zeros((0, 3)), np.zeros(0)
    own = [np.floor(at).astype(np.int64) + np.array(c) for c in np.ndindex(2, 2, 2)]
    zero = max(float(corr[tuple(np.where(k < 0, k + shape_arr, k) % shape_arr)]) for k in own)
    zero = max(zero, 1e-12)
    kept: list[np.ndarray] = []
    strengths: list[float] = []
    kept_cells: list[np.ndarray] = list(own)  # its own peak and shoulders are not elsewhere
    for flat in flats:
        if len(kept) >= count:
            break
        k = np.array(np.unravel_index(flat, shape))
        k = np.where(k >= size_r, k - shape_arr, k)
        shift = base + k * cell
        if np.linalg.norm(shift) < min_shift:
            continue
        if any(np.abs(k - c).max() <= 2 for c in kept_cells):
            continue
        kept.append(shift)
        kept_cells.append(k)
        strengths.append(float(corr.flat[flat]) / zero)
    return np.array(kept).reshape(-1, 3), np.array(strengths)
