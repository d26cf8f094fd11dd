"""Input cleaning: exact repeats and isolated strays are dropped, nothing else, and the
decision does not depend on the strays themselves."""

from __future__ import annotations

import numpy as np

from pcreg.registration.cleaning import drop_duplicates, drop_isolated


def test_drop_duplicates_keeps_first_and_order(rng):
    pts = rng.normal(size=(500, 3))
    assert drop_duplicates(pts) is pts  # no repeats: the array itself, no copy
    doubled = np.vstack([pts, pts[::7]])
    np.testing.assert_array_equal(drop_duplicates(doubled), pts)
    near = pts.copy()
    near[1] = np.nextafter(near[0], np.inf)  # one ulp apart is not a repeat
    assert len(drop_duplicates(near)) == 500


def test_drop_isolated_removes_strays_only(rng):
    surface = rng.uniform(0, 4, (5000, 3)) * [1, 1, 0.01]  # a dense 4 m slab
    strays = rng.uniform(-400, 400, (50, 3)) + 1000  # far from it and from each other
    kept = drop_isolated(np.vstack([surface, strays]), 0.4)
    np.testing.assert_array_equal(kept, surface)
    assert drop_isolated(surface, 0.4) is surface  # nothing isolated: the array itself
    pair = np.array([[0.0, 0, 0], [0.3, 0, 0]])  # two points 0.3 apart: neighbours
    assert len(drop_isolated(np.vstack([surface, pair + 50]), 0.4)) == 5002


def test_drop_isolated_decision_ignores_the_strays(rng):
    """A real point near a cell boundary is kept or dropped the same way with strays added
    (the grid is the anchor's, not the cloud's minimum, which strays move)."""
    sparse = rng.uniform(0, 40, (3000, 3))  # ~2.8 m spacing: many points near the cut-off
    base = drop_isolated(sparse, 2.0, np.array([5e5, 4.2e6, 0.0]))
    strays = rng.uniform(-4000, 4000, (30, 3))
    with_strays = drop_isolated(np.vstack([sparse, strays]), 2.0, np.array([5e5, 4.2e6, 0.0]))
    np.testing.assert_array_equal(with_strays, base)
    assert 0 < len(base) < len(sparse)
