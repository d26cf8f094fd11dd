"""Which readings of the units ``auto`` tries, and in what order
(:mod:`pcreg.registration.reading_choice`)."""

from __future__ import annotations

import numpy as np
import pytest


def test_sparse_readings_are_skipped_and_far_object_readings_are_dropped(monkeypatch, rng):
    """A reading under which the cloud is sparser than the network's voxel is not tried
    where another is plausible (tried last where none is, and for the labelled set); one
    voxel count per reading; an object reading more than 10x from a plausible exact unit is
    not tried at all (a street in metres is not an object)."""
    import pcreg.registration.checks as checks
    from pcreg.registration.reading_choice import by_sampling as _by_sampling
    from pcreg.registration.scale import Reading

    cloud = rng.uniform(0, 10, (2000, 3))  # 10 m: dense at 5 cm voxels only if scaled down
    reads = [
        Reading("metres", "indoor", 0.001),  # voxel 50 m: every point shares a cell: dense
        Reading("millimetres", "indoor", 100.0),  # voxel 0.5 mm: one point a cell: sparse
        Reading("centimetres", "indoor", 0.01),  # voxel 5 m: dense
    ]
    counted = []
    real = checks.voxel_count
    monkeypatch.setattr(checks, "voxel_count", lambda p, v: counted.append(v) or real(p, v))
    assert [r.units for r in _by_sampling(reads, cloud, cloud, {}, keep_sparse=True)] == [
        "metres", "centimetres", "millimetres"
    ]  # fmt: skip
    assert len(counted) == 3
    skipped = []
    assert [r.units for r in _by_sampling(reads, cloud, cloud, {}, skipped=skipped)] == [
        "metres", "centimetres"
    ]  # fmt: skip
    assert [r.units for r in skipped] == ["millimetres"]  # not tried: another is plausible
    only_sparse = [reads[1], Reading("centimetres", "indoor", 50.0)]
    assert len(list(_by_sampling(only_sparse, cloud, cloud, {}))) == 2  # none plausible: kept
    counted.clear()
    assert [r.units for r in _by_sampling(reads[:1], cloud, cloud, {})] == ["metres"]
    assert not counted  # one reading: nothing to order, nothing counted
    near = Reading("metres", "indoor", 0.005, True)  # 5x from the metres reading: kept
    far = Reading("metres", "indoor", 0.5, True)  # 500x: dropped
    kept = _by_sampling([reads[0], near, far], cloud, cloud, {})
    assert [r.scale for r in kept] == [0.001, 0.005]


def test_a_dense_object_is_read_at_4_m_and_a_room_scaled_down_as_the_room(monkeypatch, rng):
    """An object reading scaled by a power of ten stands only where the clouds are sampled
    like a room at that scale; a dense object scan (every point its own voxel at x100) is
    scaled to OBJECT_EXTENT as other objects are, and a reading that then repeats another is
    dropped. One voxel count per power-of-ten object reading, none on other readings."""
    from dataclasses import replace

    import pcreg.registration.checks as checks
    from pcreg.registration.checks import cloud_extent
    from pcreg.registration.reading_choice import dense_objects as _dense_objects
    from pcreg.registration.scale import OBJECT_EXTENT, readings

    def box_faces(side: float, step: float) -> np.ndarray:
        """The six faces of a cube of ``side``, a point every ``step``."""
        u = np.arange(0, side, step)
        a, b = (g.ravel() for g in np.meshgrid(u, u))
        flat = [np.c_[a, b, np.full_like(a, c)] for c in (0.0, side)]
        faces = [f[:, perm] for f in flat for perm in ([0, 1, 2], [0, 2, 1], [2, 0, 1])]
        return np.concatenate(faces)

    # a 0.1 m object scanned every 0.8 mm: x100 makes a 17 m "room", a point every 8 cm
    scan = box_faces(0.1, 0.0008)
    extent = cloud_extent(scan)
    reads = readings(extent)
    assert [(r.scale, r.object) for r in reads] == [(100.0, True)]  # the extent alone: x100
    counted = []
    real = checks.voxel_count
    monkeypatch.setattr(checks, "voxel_count", lambda p, v: counted.append(v) or real(p, v))
    dense = _dense_objects(reads, scan, scan, extent, {})
    assert [(r.units, r.scale, r.object) for r in dense] == [
        ("metres", pytest.approx(OBJECT_EXTENT / extent), True)
    ]
    assert len(counted) == 1
    # a 3 m room sampled every 2.5 cm, given in units of 100 m: x100 is the room itself
    room = box_faces(3.0, 0.025) * 0.01
    room_extent = cloud_extent(room)
    room_reads = readings(room_extent)
    assert [(r.scale, r.object) for r in room_reads] == [(100.0, True)]
    assert _dense_objects(room_reads, room, room, room_extent, {}) == room_reads
    # a 1.2 m patch scanned every 2.5 mm (a crop of an RGB-D frame): x10 thins it 4x, yet
    # leaves 57,600 points at the network's voxel (CROWDED_OBJECT): scaled to 4 m too
    u = np.arange(0, 1.2, 0.0025)
    patch = np.c_[np.meshgrid(u, u)[0].ravel(), np.meshgrid(u, u)[1].ravel(), np.zeros(u.size**2)]
    patch_extent = cloud_extent(patch)
    patch_reads = readings(patch_extent)
    assert [(r.scale, r.object) for r in patch_reads] == [(1.0, False), (10.0, True)]
    crowded = _dense_objects(patch_reads, patch, patch, patch_extent, {})
    assert [(r.units, r.scale, r.object) for r in crowded] == [
        ("metres", 1.0, False),
        ("metres", pytest.approx(OBJECT_EXTENT / patch_extent), True),
    ]  # named in the exact unit it is plausible in (it was "millimetres": a 1.7 mm object)
    # a reading already at OBJECT_EXTENT (a 0.24 m object) and an exact unit are not counted
    counted.clear()
    for cloud in (box_faces(0.14, 0.002), box_faces(4.0, 0.05)):
        ext = cloud_extent(cloud)
        plain = readings(ext)
        assert all(r.scale == pytest.approx(OBJECT_EXTENT / ext) for r in plain if r.object)
        assert _dense_objects(plain, cloud, cloud, ext, {}) == plain
    assert not counted
    # two readings that become the same are kept once
    twice = [reads[0], replace(reads[0], units="centimetres")]
    assert len(_dense_objects(twice, scan, scan, extent, {})) == 1
    # the pair's counts are shared with _by_sampling: the room's x100 reading, counted by
    # _dense_objects, is not counted again when the readings are sorted by sampling
    from pcreg.registration.reading_choice import by_sampling as _by_sampling
    from pcreg.registration.scale import Reading

    counted.clear()
    seen: dict = {}
    kept = _dense_objects(room_reads, room, room, room_extent, seen)
    assert len(counted) == 1
    metres = Reading("metres", "indoor", 1.0)
    list(_by_sampling([*kept, metres], room, room, seen))
    assert len(counted) == 2  # metres only


def test_the_too_small_retry_is_an_object_where_it_scales_up_in_any_unit(rng):
    """The retry's reading is an object where it scales the pair up from its unit's metres
    (x0.04 of centimetres is 4x) or the user said ``--units object``, and a room where it
    scales a scene down (x0.3 of metres)."""
    from types import SimpleNamespace

    from pcreg.registration.reading_choice import finer_reading as _finer_reading

    ball = rng.normal(size=(2000, 3))
    ball = 30.0 * ball / np.linalg.norm(ball, axis=1, keepdims=True)  # 0.6 m across, in cm
    tried = [{"units": "centimetres", "scale": 0.01, "model": "indoor"}]
    for units in ("centimetres", None):
        pipe = SimpleNamespace(model=None, units=units)
        got = _finer_reading(pipe, ball, ball * 1.3, tried)
        assert got.units == "centimetres" and got.object and got.model == "indoor"
        assert got.scale == pytest.approx(4.0 / cloud_extent_of(ball), rel=1e-6)
    named = _finer_reading(SimpleNamespace(model=None, units="object"), ball, ball * 1.3, tried)
    assert named.object
    hall = np.random.default_rng(0).uniform([0, 0, 0], [30.0, 2.0, 2.5], (20_000, 3))
    down = _finer_reading(
        SimpleNamespace(model=None, units=None), hall, hall,
        [{"units": "metres", "scale": 1.0, "model": "outdoor"},
         {"units": "millimetres", "scale": 0.15, "model": "indoor"}],
    )  # fmt: skip
    assert down.units == "metres" and not down.object and down.scale == pytest.approx(0.3)
    assert _finer_reading(SimpleNamespace(model="indoor", units=None), ball, ball, tried) is None


def cloud_extent_of(points: np.ndarray) -> float:
    from pcreg.registration.checks import cloud_extent

    return cloud_extent(points)
