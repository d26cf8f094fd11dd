"""Other places a cloud fits at a fixed orientation (``pcreg.geometry.shift_peaks``)."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg.geometry.shift_peaks import shift_cell, translation_peaks


def _cluster(rng, n=3000):
    """Points on three small boxes of different sizes (unit-free), with their normals."""
    pts, normals = [], []
    for lo, size in (([0, 0, 0], [1.0, 0.6, 0.1]), ([0.1, 0.1, 0.1], [0.3, 0.3, 0.5]),
                     ([0.6, 0.2, 0.1], [0.3, 0.2, 0.2])):  # fmt: skip
        p = rng.uniform(0, 1, (n, 3)) * size
        face = rng.integers(3, size=n)
        side = rng.integers(2, size=n)
        p[np.arange(n), face] = side * np.asarray(size)[face]
        nrm = np.zeros((n, 3))
        nrm[np.arange(n), face] = 2.0 * side - 1.0
        pts.append(p + lo)
        normals.append(nrm)
    return np.vstack(pts), np.vstack(normals)


def test_the_other_copy_is_found_and_the_estimate_itself_is_not():
    """The reference holds the cluster twice, at 0 and at (2.0, -0.7, 0.3): with the source
    on the first copy, the first peak away from the estimate is the second copy's shift,
    to within a cell; a translation shorter than ``min_shift`` is never returned."""
    rng = np.random.default_rng(0)
    src, src_n = _cluster(rng)
    other = np.array([2.0, -0.7, 0.3])
    a, a_n = _cluster(rng)
    b, b_n = _cluster(rng)
    ref, ref_n = np.vstack([a, b + other]), np.vstack([a_n, b_n])
    cell = shift_cell(src, ref, 0.01)
    assert cell == pytest.approx(np.ptp(ref, 0).max() / 24)
    peaks, strength = translation_peaks(src, src_n, ref, ref_n, cell, count=3, min_shift=0.3)
    assert strength[0] > 0.8  # the copy overlaps about as much (grid-dependent)
    assert len(peaks) >= 1 and np.all(np.linalg.norm(peaks, axis=1) >= 0.3)
    assert np.linalg.norm(peaks[0] - other) < 1.5 * cell, (peaks[0], cell)
    # the source on the second copy: the first copy lies the other way
    back, _ = translation_peaks(src + other, src_n, ref, ref_n, cell, count=3, min_shift=0.3)
    assert np.linalg.norm(back[0] + other) < 1.5 * cell, back[0]


def test_a_single_copy_has_no_strong_other_place_and_empty_input_none():
    rng = np.random.default_rng(1)
    src, src_n = _cluster(rng)
    ref, ref_n = _cluster(rng)
    cell = shift_cell(src, ref, 0.01)
    none, no_strength = translation_peaks(src[:0], src_n[:0], ref, ref_n, cell)
    assert none.shape == (0, 3) and no_strength.shape == (0,)
    peaks, strength = translation_peaks(src, src_n, ref, ref_n, cell, count=4, min_shift=0.3)
    assert np.all(strength < 0.8)  # no other place overlaps nearly as much
    assert np.all(np.linalg.norm(peaks, axis=1) >= 0.3)
    # clouds that do not touch at the estimate: no strength to measure against
    far, _ = translation_peaks(src + 100.0, src_n, ref, ref_n, cell)
    assert far.shape == (0, 3)
