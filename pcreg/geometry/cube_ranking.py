"""Rank the 24 cube hypotheses of the Manhattan orientation search before the network runs.

After both clouds are rotated into their Manhattan frames (:mod:`pcreg.geometry.manhattan`),
the source is one of the 24 cube rotations (plus a few degrees) and some translation away from
the reference. For each cube rotation ``g`` this scores how well ``g @ src`` can be made to
overlap ``ref`` by a translation alone: the peak over all translations of the cross-correlation
of the two clouds' occupancy grids, computed with FFTs (the classical phase-correlation idea,
Kuglin & Hines 1975, here in 3-D and without the phase normalisation).

Each cloud's grid has six channels, one per signed coordinate axis: a point goes to the
channel of the axis its normal is closest to, with the normal's sign (normals are turned
towards the cloud's centroid, so a floor seen from above and a ceiling seen from below land in
different channels). A cube rotation permutes and flips the source's channels too. Matching
like with like keeps the large floor and walls from overlapping themselves under a wrong
rotation; each channel pair is normalised by the geometric mean of the two channels' sizes so
that the floor does not outvote the rest.

Rotating a grid by a signed permutation of its axes permutes (and, for a flip, negates) the
indices of its discrete Fourier transform, so the source's spectrum is computed once (one
``rfftn``, completed by its conjugate symmetry) and each hypothesis costs a gather, a product and
one inverse transform. Cyclic correlation over a grid at least twice each cloud's extent equals
the linear one, wherever each cloud sits in it.

numpy's FFT (pocketfft, float32 in and complex64 out from numpy 2.0): on the real 3DMatch demo
pair's frames the 24 scores take 7 ms at the default 0.2 m cells, against 16 ms for the torch
FFTs this replaced (one thread, which also transformed the source once per reversal pattern),
and equal them to 1e-5 relative (``tests/geometry/test_cube_ranking.py``); torch is not
imported.

:class:`pcreg.registration.search.ManhattanHypotheses` hands the best-ranked hypotheses to the
network first (``SearchConfig.orientation_keep``).
"""

from __future__ import annotations

import numpy as np

from pcreg.geometry.columns import column_min
from pcreg.geometry.manhattan import CUBE_ROTATIONS

__all__ = ["MAX_CELLS", "cube_hypothesis_scores", "grid_voxel", "normal_channels"]

#: the most grid cells along an axis a cloud may span (the FFT grid is twice that)
MAX_CELLS = 64


def normal_channels(normals: np.ndarray) -> np.ndarray:
    """``(N,)`` int64 channel in ``0..5`` of each ``(N, 3)`` normal: ``2 * axis + (sign > 0)``
    of the coordinate axis with the largest absolute component."""
    normals = np.asarray(normals)
    axis = np.abs(normals).argmax(1)
    positive = normals[np.arange(len(normals)), axis] > 0
    return 2 * axis + positive


def grid_voxel(src_points: np.ndarray, ref_points: np.ndarray, voxel: float) -> float:
    """The cell size actually used: ``voxel``, or coarser for clouds spanning more than
    ``MAX_CELLS - 1`` cells, so that the grid (and time and memory) stays bounded."""
    span = max(float(np.ptp(ref_points, 0).max()), float(np.ptp(src_points, 0).max()))
    return max(voxel, span / (MAX_CELLS - 1))


def next_fast_len(target: int) -> int:
    """The smallest ``n >= target`` whose prime factors are at most 11 (the sizes pocketfft
    transforms fastest): ``scipy.fft.next_fast_len(target)`` without importing scipy
    (``scipy.fft`` takes 0.1 s to import), for the grid sizes here (up to ``2 * MAX_CELLS``)."""
    n = max(1, int(target))
    while True:
        m = n
        for p in (2, 3, 5, 7, 11):
            while m % p == 0:
                m //= p
        if m == 1:
            return n
        n += 1


def _grid_indices(points: np.ndarray, voxel: float) -> np.ndarray:
    return np.floor((points - column_min(points)) / voxel).astype(np.int64)


def _occupancy(idx: np.ndarray, channels: np.ndarray, n: int) -> np.ndarray:
    """``(6, n, n, n)`` float32 0/1 occupancy of voxel indices ``idx (N, 3)``."""
    flat = ((channels * n + idx[:, 0]) * n + idx[:, 1]) * n + idx[:, 2]
    grid = np.zeros(6 * n**3, np.float32)
    grid[flat] = 1.0
    return grid.reshape(6, n, n, n)


def _signed_permutation(rot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(perm, sign)`` with ``rot[i, perm[i]] = sign[i]``, so that
    ``(rot @ x)[i] = sign[i] * x[perm[i]]``."""
    perm = np.abs(rot).argmax(1)
    return perm, np.sign(rot[np.arange(3), perm])


def _channel_source(rot: np.ndarray) -> list[int]:
    """For each channel of the rotated grid, the channel of the original it comes from: a
    normal along axis ``perm[i]`` with sign ``s`` ends up along axis ``i`` with sign
    ``s * sign[i]``."""
    perm, sign = _signed_permutation(rot)
    out = []
    for c in range(6):
        i, positive = divmod(c, 2)
        s = 1 if positive else -1
        out.append(2 * int(perm[i]) + int(s * sign[i] > 0))
    return out


def _full_spectrum(half: np.ndarray) -> np.ndarray:
    """The full spectrum ``(C, n, n, n)`` of real grids from their ``rfftn`` half spectrum
    ``(C, n, n, n // 2 + 1)``: ``F(-k) = conj(F(k))`` fills the rest of the last axis."""
    n = half.shape[1]
    rest = np.arange(n // 2 + 1, n)  # the last axis' missing frequencies, read at n - k
    neg = (-np.arange(n)) % n
    tail = half[:, neg[:, None, None], neg[None, :, None], (n - rest)[None, None, :]].conj()
    return np.concatenate([half, tail], axis=-1)


def _reversed_axes(rot: np.ndarray) -> tuple[int, ...]:
    """The grid axes (1-3 of a ``(C, n, n, n)`` array) that the signed permutation ``rot``
    reverses: those read with a negative sign."""
    perm, sign = _signed_permutation(rot)
    return tuple(sorted(1 + int(perm[i]) for i in range(3) if sign[i] < 0))


def _reflected(spectrum: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """``spectrum (C, n, n, n)`` read at ``-k`` along ``axes``: the spectrum of the grids
    reflected (``x -> -x``, cyclically) along those axes."""
    n = spectrum.shape[1]
    neg = (-np.arange(n)) % n
    for axis in axes:
        spectrum = np.take(spectrum, neg, axis=axis)
    return spectrum


def _rotated_half_spectrum(reflected: np.ndarray, rot: np.ndarray) -> np.ndarray:
    """The half spectrum ``(C, n, n, n // 2 + 1)`` (last axis ``0..n/2``, what ``irfftn``
    needs; a view) of grids turned by the signed permutation ``rot``, up to a translation
    (which the peak over all translations ignores), from ``reflected (C, n, n, n)``: the full
    spectrum of the grids reflected along ``_reversed_axes(rot)`` (:func:`_reflected`).

    With ``y = rot @ x``, axis ``i`` of the turned grid is axis ``perm[i]`` of the original,
    reversed where ``sign[i] < 0``. Reversing an axis of length ``n`` is the reflection
    ``x -> -x`` followed by a shift of ``n - 1`` cells, and the reflection reads the spectrum
    at ``-k``. So one forward transform serves all the rotations: one reflected copy of the
    spectrum per reversal pattern (at most 8, one alive at a time), each rotation only
    permuting its axes."""
    perm, _ = _signed_permutation(rot)
    spec = reflected.transpose(0, *(1 + int(p) for p in perm))
    return spec[..., : reflected.shape[-1] // 2 + 1]


def cube_hypothesis_scores(
    src_points: np.ndarray,
    src_normals: np.ndarray,
    ref_points: np.ndarray,
    ref_normals: np.ndarray,
    voxel: float = 0.2,
    rotations: np.ndarray = CUBE_ROTATIONS,
) -> np.ndarray:
    """How well ``rot @ src`` overlaps ``ref`` after the best translation, for each rotation.

    Args:
        src_points ``(N, 3)``, ref_points ``(M, 3)``: metres, each in its Manhattan frame.
        src_normals ``(N, 3)``, ref_normals ``(M, 3)``: unit normals turned towards each
            cloud's centroid (the sign matters: it picks the channel).
        voxel: grid cell in metres. The Manhattan frames' residual (a few degrees) moves
            points a few centimetres over a few metres: well within a 0.2 m cell, which also
            keeps the grid small (a 3DMatch fragment pair: 32-45^3 cells, ~7 ms for all 24).
            Raised to ``span / (MAX_CELLS - 1)`` for clouds spanning more than ~12.7 m, so
            that time and memory stay bounded (at the cap, n = 128: the source's full spectrum
            and one reflected copy of it, 100 MB each, the reference's half spectrum of 52 MB
            and a 64 MB batch).
        rotations: ``(H, 3, 3)`` signed permutation matrices (default: the 24 cube rotations).

    Returns:
        ``(H,)`` float64 scores: the peak of the channel-normalised occupancy correlation,
        higher is better.
    """
    ref_points = np.asarray(ref_points, np.float64)
    src_points = np.asarray(src_points, np.float64)
    voxel = grid_voxel(src_points, ref_points, voxel)
    ref_idx = _grid_indices(ref_points, voxel)
    src_idx = _grid_indices(src_points, voxel)
    extent = int(max(ref_idx.max(), src_idx.max())) + 1
    n = next_fast_len(2 * extent)
    ref_ch = normal_channels(ref_normals)
    src_ch = normal_channels(src_normals)
    ref_grid = _occupancy(ref_idx, ref_ch, n)
    src_grid = _occupancy(src_idx, src_ch, n)
    # each channel pair is normalised by sqrt(|ref_c| |src_c'|): fold one factor into each side
    ref_grid *= (1.0 / np.sqrt(np.maximum(ref_grid.sum((1, 2, 3)), 1.0)))[:, None, None, None]
    src_grid *= (1.0 / np.sqrt(np.maximum(src_grid.sum((1, 2, 3)), 1.0)))[:, None, None, None]
    ref_spec = np.fft.rfftn(ref_grid, axes=(1, 2, 3)).conj()  # (6, n, n, n//2+1) complex64
    rotations = np.asarray(rotations)
    spectrum = _full_spectrum(np.fft.rfftn(src_grid, axes=(1, 2, 3)))  # (6, n, n, n)
    # hypotheses per batched inverse FFT: about 64 MB of complex64 spectra at a time
    chunk = max(1, (64 << 20) // (ref_spec.size * 8))
    patterns: dict[tuple[int, ...], list[int]] = {}
    for i, rot in enumerate(rotations):
        patterns.setdefault(_reversed_axes(rot), []).append(i)
    scores = np.zeros(len(rotations), np.float64)
    for axes, members in patterns.items():
        reflected = _reflected(spectrum, axes)
        for first in range(0, len(members), chunk):
            idx = members[first : first + chunk]
            cross = np.zeros((len(idx), *ref_spec.shape[1:]), ref_spec.dtype)
            for row, i in enumerate(idx):
                turned = _rotated_half_spectrum(reflected, rotations[i])
                for c, source in enumerate(_channel_source(rotations[i])):  # like channels
                    cross[row] += turned[source] * ref_spec[c]
            peaks = np.fft.irfftn(cross, s=(n, n, n), axes=(1, 2, 3)).max((1, 2, 3))
            scores[idx] = peaks
    return scores
