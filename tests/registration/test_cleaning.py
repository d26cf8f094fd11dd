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


def test_drop_isolated_is_exact_and_ignores_offsets_and_strays(rng):
    """The same points are dropped at any offset and with strays added: the test is the
    distance to the nearest neighbour, not a grid's cells."""
    sparse = rng.uniform(0, 40, (3000, 3))  # ~2.8 m spacing: many points near the cut-off
    base = drop_isolated(sparse, 2.0)
    assert 0 < len(base) < len(sparse)
    from scipy.spatial import cKDTree

    nearest = cKDTree(sparse).query(sparse, k=2)[0][:, 1]
    np.testing.assert_array_equal(base, sparse[nearest <= 2.0])
    for offset in (1e3, 1e6, 4.2e6):
        np.testing.assert_allclose(drop_isolated(sparse + offset, 2.0) - offset, base,
                                   atol=1e-6)  # fmt: skip
    strays = rng.uniform(-4000, 4000, (30, 3))
    np.testing.assert_array_equal(drop_isolated(np.vstack([sparse, strays]), 2.0), base)
