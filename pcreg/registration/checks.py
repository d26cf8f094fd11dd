"""Checks of a pair that need no model: degenerate clouds, mismatched scales, too few points.

They run before any network is loaded (a refusal costs milliseconds, not a model load) and
name what is actually wrong: too few points (or distinct positions), all points coinciding,
zero extent, or extents
that differ by more than :data:`MAX_SCALE_RATIO` (different units or a wrong file).
"""

from __future__ import annotations

import numpy as np

from pcreg.engine.devices import check_device
from pcreg.errors import InputError
from pcreg.geometry.columns import column_max, column_min

__all__ = [
    "MAX_COORDINATE",
    "MAX_INSIDE_RATIO",
    "MAX_SCALE_RATIO",
    "MIN_POINTS",
    "TooFewPointsError",
    "check_cloud",
    "check_counts",
    "check_device",
    "check_pair",
    "check_voxel_counts",
    "check_voxel_size",
    "cloud_extent",
    "voxel_count",
]

#: fewest points (given, and left after voxel downsampling) registration is attempted with
MIN_POINTS = 100
#: extents differing by more than this factor mean different units or a wrong file
MAX_SCALE_RATIO = 10.0
#: ``--method auto`` searches a cloud up to this many times smaller inside the other (an
#: object in a scene, :mod:`pcreg.registration.inside`); beyond it the units must differ
MAX_INSIDE_RATIO = 50.0


class TooFewPointsError(InputError):
    """Too few points (given, or after voxel downsampling) to register."""


def cloud_extent(points: np.ndarray) -> float:
    """Diagonal (the clouds' units) of the 1st-99th percentile bounding box of
    ``points (N, 3)``: the size of the scene, ignoring a few stray returns."""
    lo, hi = np.percentile(points, [1, 99], axis=0)
    return float(np.linalg.norm(hi - lo))


def voxel_count(points: np.ndarray, voxel: float) -> int:
    """Number of occupied ``voxel``-sized cells of ``points (N, 3)`` (float64 keys: exact for
    coordinates far from the origin)."""
    pts = np.asarray(points, np.float64)
    if len(pts) == 0:
        return 0
    keys = np.floor((pts - column_min(pts)) / voxel)
    dims = column_max(keys) + 1
    if float(np.prod(dims)) < 2.0**62:
        # one int64 per cell, sorted in place and its runs counted: 8 ms for a 120k-point
        # KITTI scan against 11-23 ms through np.unique (which copies and builds a mask), and
        # ~10x faster than np.unique(axis=0)'s row sort
        k = keys.astype(np.int64)
        d = dims.astype(np.int64)
        cells = (k[:, 0] * d[1] + k[:, 1]) * d[2] + k[:, 2]
        cells.sort()
        return int(np.count_nonzero(cells[1:] != cells[:-1])) + 1
    return len(np.unique(keys, axis=0))


def check_cloud(points: np.ndarray, name: str) -> float:
    """Refuse a cloud nothing can be registered with; return its extent.

    Raises:
        TooFewPointsError: fewer than :data:`MIN_POINTS` points, or fewer distinct positions.
        InputError: all points coincide, a zero extent (all on one point but a few),
            coordinates beyond :data:`MAX_COORDINATE`, or all points on a line or a plane."""
    n = len(points)
    _check_count(points, name)
    lo, hi = column_min(points), column_max(points)
    reach = float(max(np.abs(lo).max(), np.abs(hi).max()))
    if reach > MAX_COORDINATE:
        raise InputError(
            name,
            f"coordinates reach {reach:.3g}: beyond {MAX_COORDINATE:.0e} (float64 steps there "
            f"exceed 0.1 of the unit; a corrupt scale or offset?)",
        )
    if np.array_equal(lo, hi):  # unreachable after _check_count; kept as the extent's guard
        raise InputError(name, f"all {n} points coincide (zero extent): nothing to register")
    extent = cloud_extent(points)
    if not extent > 0:
        raise InputError(
            name,
            f"zero extent: at least 98% of its {n} points lie on one point "
            f"(the full bounding box spans {float(np.linalg.norm(hi - lo)):.3g})",
        )
    _check_flat(points, name)
    return extent


def check_counts(src: np.ndarray, ref: np.ndarray, names: tuple[str, str] = ("src", "ref")) -> None:
    """Refuse a pair with too few points or too few distinct positions, before anything
    divides by a cloud's extent (the unit readings of ``method="auto"`` do). Costs well
    under a millisecond per cloud unless the cloud is degenerate.

    Raises:
        TooFewPointsError: fewer than :data:`MIN_POINTS` points, or points that collapse to
            fewer than :data:`MIN_POINTS` distinct positions (e.g. coordinates rounded to
            whole metres).
        InputError: all points of a cloud coincide."""
    _check_count(src, names[0])
    _check_count(ref, names[1])


def _check_count(points: np.ndarray, name: str) -> None:
    """:func:`check_counts` for one cloud. Repeated points count once (the pipeline drops
    them), so a cloud's count is checked as distinct positions, and the message names both
    numbers: what was given and what it collapses to."""
    n = len(points)
    distinct = _distinct_count(points, MIN_POINTS) if n > 1 else n
    if n > 1 and distinct == 1:
        raise InputError(name, f"all {n} points coincide (zero extent): nothing to register")
    if n < MIN_POINTS:
        raise TooFewPointsError(
            name, f"too few points: {n} given, at least {MIN_POINTS} are needed to register"
        )
    if distinct < MIN_POINTS:
        raise TooFewPointsError(
            name,
            f"{n} points collapse to {distinct} distinct positions (repeated points count "
            f"once); at least {MIN_POINTS} are needed to register (coordinates rounded to "
            "whole units?)",
        )


def _distinct_count(points: np.ndarray, enough: int) -> int:
    """The number of distinct rows of ``points (N, 3)``, exact when it is below ``enough``
    (otherwise some number at least ``enough``). A strided sample of ``20 * enough`` rows
    answers for any real cloud; only a degenerate one is counted in full."""
    sample = np.asarray(points)[:: max(1, len(points) // (20 * enough))]
    found = len(np.unique(sample, axis=0))
    if found >= enough or len(sample) == len(points):
        return found
    return len(np.unique(np.asarray(points), axis=0))


#: coordinates beyond this magnitude are refused: float64 steps there exceed 0.125 units, and
#: squares of them overflow (the Earth's orbit is 1.5e11 m across)
MAX_COORDINATE = 1e15
#: a cloud whose thinnest principal spread is below this fraction of its widest is flat
FLAT_RATIO = 1e-3


def _check_flat(points: np.ndarray, name: str) -> None:
    """Refuse a cloud on one line or one plane: a rigid transform onto it is not determined
    (it slides along the line or the plane), so any answer would be arbitrary. The test: the
    principal standard deviations of the points (of at most 20k of them, evenly strided)."""
    sample = points[:: max(1, len(points) // 20000)]
    sample = sample - np.median(sample, axis=0)
    unit = float(np.abs(sample).max()) or 1.0  # the covariance of unit-sized numbers
    cov = np.cov((sample / unit).T)
    spread = unit * np.sqrt(np.clip(np.linalg.eigvalsh(cov), 0.0, None))  # ascending
    if spread[1] < FLAT_RATIO * spread[2]:
        raise InputError(name, "all points lie on one line: a rigid transform onto it is "
                         "not determined")  # fmt: skip
    if spread[0] < FLAT_RATIO * spread[2]:
        raise InputError(
            name,
            f"all points lie on one plane (thickness {spread[0]:.2g} against a spread of "
            f"{spread[2]:.3g}): a rigid transform onto it is not determined",
        )


def check_pair(
    src: np.ndarray, ref: np.ndarray, names: tuple[str, str] = ("src", "ref")
) -> tuple[float, float]:
    """:func:`check_cloud` on both clouds, then their scales; returns their extents.

    Raises:
        InputError: a degenerate cloud, or extents that differ by more than 10x."""
    extents = (check_cloud(src, names[0]), check_cloud(ref, names[1]))
    small, large = sorted(extents)
    if large / small > MAX_SCALE_RATIO:
        raise InputError(
            f"{names[0]} / {names[1]}",
            f"the clouds span {extents[0]:.3g} and {extents[1]:.3g} (1st-99th percentile box "
            f"diagonals): scales differ by more than {MAX_SCALE_RATIO:g}x (different units, "
            "e.g. millimetres vs metres, or a wrong file?); --method auto searches a cloud up "
            f"to {MAX_INSIDE_RATIO:g}x smaller inside the other (an object in a scene)",
        )
    return extents


def check_voxel_counts(
    src: np.ndarray,
    ref: np.ndarray,
    names: tuple[str, str],
    voxel: float,
    counts: tuple[int, int] | None = None,
) -> tuple[int, int]:
    """Points of each cloud left after ``voxel`` downsampling (``counts`` when already
    known); TooFewPointsError below :data:`MIN_POINTS`."""
    known = counts
    counts = []
    for k, (pts, name) in enumerate(zip((src, ref), names, strict=True)):
        n = voxel_count(pts, voxel) if known is None else known[k]
        if n < MIN_POINTS:
            raise TooFewPointsError(
                name,
                f"too few points: only {n} left after {voxel:g} m voxel downsampling "
                f"({len(pts)} given); at least {MIN_POINTS} are needed to register "
                "(are the coordinates in metres?)",
            )
        counts.append(n)
    return counts[0], counts[1]


#: the most voxels per side a voxel size may make of a cloud (Open3D indexes voxels with int32)
MAX_VOXELS_PER_SIDE = 1 << 20


def check_voxel_size(voxel: float, extent: float, name: str = "voxel_size") -> None:
    """Refuse a voxel that cuts a cloud spanning ``extent`` into more than
    :data:`MAX_VOXELS_PER_SIDE` cells per side (Open3D fails on it with a C++ error)."""
    if extent / voxel > MAX_VOXELS_PER_SIDE:
        raise InputError(
            name,
            f"{voxel:g} is too small for clouds spanning {extent:.3g} (over "
            f"{MAX_VOXELS_PER_SIDE} voxels per side); use at least "
            f"{extent / MAX_VOXELS_PER_SIDE:.3g}",
        )
