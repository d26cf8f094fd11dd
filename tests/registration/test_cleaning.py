"""Input cleaning: exact repeats and isolated strays are dropped, nothing else, and the
decision does not depend on the strays themselves."""

from __future__ import annotations

import numpy as np

from pcreg.registration.cleaning import drop_duplicates, drop_isolated, nearest_cells


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


def test_nearest_cells_keeps_the_near_field_up_to_the_cap(rng):
    """A scan over its cap keeps exactly the points nearer its centre than the first cell
    left out, which are ``cap`` cells; under the cap it is returned itself."""
    from pcreg.registration.checks import voxel_count

    # a LiDAR-like ground: dense near the centre, sparse far out (rings of equal point count)
    radius = np.repeat(np.arange(1.0, 81.0), 400)
    angle = rng.uniform(0, 2 * np.pi, len(radius))
    scan = np.c_[radius * np.cos(angle), radius * np.sin(angle), rng.normal(0, 0.05, len(radius))]
    cells = voxel_count(scan, 4.8)
    assert nearest_cells(scan, 4.8, cells) is scan  # at the cap: untouched
    cut = nearest_cells(scan, 4.8, 120)
    dist, kept = np.linalg.norm(scan, axis=1), np.linalg.norm(cut, axis=1)
    assert len(cut) < len(scan)
    # a disc: every point within the kept radius is kept, none beyond it
    np.testing.assert_array_equal(cut, scan[dist <= kept.max()])
    # the cells it occupies, on the same grid as the whole scan's: the cap
    corner = scan.min(0)
    keys = {tuple(k) for k in np.floor((cut - corner) / 4.8).astype(int)}
    assert len(keys) == 120
    # the near field is dense: it keeps most points while the cells fall by far more
    assert len(cut) / len(scan) > 120 / cells


def test_the_outdoor_network_sees_about_its_superpoint_cap(rng):
    """What the network is given of a cleaned pair: each cloud cut to about the outdoor
    setting's superpoint cap; the cleaning itself cuts nothing, and neither the classical
    path nor the indoor setting is cut."""
    import pytest

    from pcreg.registration.checks import voxel_count
    from pcreg.registration.pipeline import _Plan
    from pcreg.registration.result import SETTINGS

    cap = SETTINGS["outdoor"].superpoint_cap
    assert cap == 400 and SETTINGS["indoor"].superpoint_cap is None
    street = rng.uniform(-150, 150, (60_000, 3)) * [1, 1, 0.02]  # 300 m across: 7,700 cells
    assert voxel_count(street, 4.8) > 2 * cap
    network = _Plan(SETTINGS["outdoor"], "outdoor", object(), 0.3, 4.8)
    src, ref, _ = network.clean(street, street[::2], np.zeros((2, 3)))
    assert len(src) == len(street)  # the cleaning cuts nothing
    for whole in (src, ref):
        cut, cut_ref = network.for_network(whole, whole)
        np.testing.assert_array_equal(cut, cut_ref)
        assert voxel_count(cut, 4.8) <= cap + cap // 10  # the network's grid falls elsewhere
        assert np.linalg.norm(cut, axis=1).max() < 100
    classical = _Plan(SETTINGS["outdoor"], "outdoor", None, 0.3, 4.8)
    assert classical.for_network(street, street)[0] is street
    indoor = _Plan(SETTINGS["indoor"], "indoor", object(), 0.05, 4.8)
    assert indoor.for_network(street, street)[0] is street
    with pytest.raises(ValueError, match="at least 1"):
        nearest_cells(street, 4.8, 0)


def test_budget_scale_brings_a_room_to_about_its_budget(rng):
    """A room's surfaces (a 12 x 10 x 3 m box, 2,300 cells of 0.4 m) scaled to a budget of 500
    cells occupy 500 or a few fewer (a surface's cells fall with the square of the factor);
    a pair already within it is left at 1; the larger cloud sets the factor, but the smaller
    one keeps about 100 cells (or all it has)."""
    import pytest
    from box_rooms import box_shell

    from pcreg.registration.checks import voxel_count
    from pcreg.registration.cleaning import budget_scale

    room = box_shell(rng, (12.0, 10.0, 3.0), 40_000)
    cells = voxel_count(room, 0.4)
    assert cells > 2000
    small = room[room[:, 0] < 3.0]  # a quarter of it
    scale = budget_scale(small, room, 0.4, 500)
    assert 0.3 < scale < 0.7
    assert 400 <= voxel_count(room * scale, 0.4) <= 500
    assert budget_scale(room, small, 0.4, 500) == scale
    assert budget_scale(room, room, 0.4, cells) == 1.0
    # a fragment onto the whole room: not shrunk below about 100 cells (or what it has)
    corner = room[(room[:, 0] < 1.5) & (room[:, 1] < 1.5)]
    assert voxel_count(corner, 0.4) < 100
    assert budget_scale(corner, room, 0.4, 500) == 1.0
    end = room[room[:, 0] < 1.5]  # an end wall: 400 cells, 76 at the room's factor
    kept = budget_scale(end, room, 0.4, 500)
    assert kept > scale and 100 <= voxel_count(end * kept, 0.4) < 200
    assert voxel_count(room * kept, 0.4) > 500  # the room stays over the budget
    with pytest.raises(ValueError, match="at least 1"):
        budget_scale(room, room, 0.4, 0)
