"""An estimate of a coarse reading of the units must hold at a finer reading's scale
(:mod:`pcreg.registration.scale_hold`)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import pcreg
from pcreg.registration.scale_hold import finer_reading_check, input_voxel, room_reading_check
from pcreg.registration.verdict import Candidate, Verdict


def _scene(seed: int = 0) -> np.ndarray:
    """A 100-unit street-like cloud: a ground plane and two rows of boxes' faces, with relief
    (unit spacing about 0.1)."""
    rng = np.random.default_rng(seed)
    ground = np.column_stack([rng.uniform(-50, 50, 40000), rng.uniform(-10, 10, 40000),
                              0.05 * rng.normal(size=40000)])  # fmt: skip
    walls = []
    for side in (-10.0, 10.0):
        for x0 in rng.uniform(-50, 45, 8):
            n = 2500
            w, h = rng.uniform(2, 6), rng.uniform(3, 12)
            walls.append(np.column_stack([x0 + rng.uniform(0, w, n), np.full(n, side),
                                          rng.uniform(0, h, n)]))  # fmt: skip
    return np.vstack([ground, *walls])


def _candidate(transform, units: str, scale: float, voxel_input: float, fitness: float):
    """A finished estimate as the search leaves it: made under ``units`` (x ``scale``),
    verified at ``voxel_input`` (input units), with its measured ``fitness``."""
    check = SimpleNamespace(radius=1.5 * voxel_input * scale)
    result = SimpleNamespace(transform=np.asarray(transform, float), units=units, scale=scale,
                             verification=check)  # fmt: skip
    return Candidate(result=result, features={"fitness": fitness}, score=0.5)


def _posed(seed: int = 0):
    """The scene as a pair far from the origin: ``src`` and ``ref = truth @ src`` (a turn and
    a 1 km offset, as georeferenced clouds come), and the truth."""
    cloud = _scene(seed)
    truth = np.eye(4)
    truth[:3, :3] = Rotation.from_euler("zyx", [40, 5, -3], degrees=True).as_matrix()
    truth[:3, 3] = [1000.0, -250.0, 30.0]
    return cloud, cloud @ truth[:3, :3].T + truth[:3, 3], truth


def _slid(truth: np.ndarray) -> np.ndarray:
    """``truth`` then 1.3 units across the street and up: inside the coarse reading's radius
    (7.5 units), far outside the fine one's (0.45)."""
    out = truth.copy()
    out[:3, 3] += truth[:3, :3] @ np.array([0.0, 1.0, 0.8])
    return out


def test_a_coarse_readings_estimate_that_fits_only_loosely_is_refused():
    src, ref, truth = _posed()
    fine = _candidate(np.eye(4), "metres", 1.0, 0.3, 0.3)
    coarse = _candidate(_slid(truth), "centimetres", 0.01, 5.0, 0.9)
    assert input_voxel(coarse) == pytest.approx(5.0) and input_voxel(fine) == pytest.approx(0.3)
    verdict = Verdict(best=coarse, registered=True, reason="")
    finer_reading_check(verdict, [fine, coarse], src, ref)
    assert not verdict.registered
    assert verdict.reason.startswith(
        "units: the estimate under the centimetres reading does not hold at the finer scale "
        "of the metres reading"
    )
    # the slid pose fits 1 % of the source at 0.3 units: under 0.9 x the 30 % it is held to
    assert "it fits 1 % of the source there, where that reading's best estimate fits 30 %" in (
        verdict.reason
    )


def test_a_coarse_readings_right_estimate_stands():
    src, ref, truth = _posed()
    fine = _candidate(np.eye(4), "metres", 1.0, 0.3, 0.95)  # a wrong pose fitting 95 %
    coarse = _candidate(truth, "centimetres", 0.01, 5.0, 0.99)
    verdict = Verdict(best=coarse, registered=True, reason="")
    finer_reading_check(verdict, [fine, coarse], src, ref)
    assert verdict.registered, verdict.reason  # the truth fits all of it at 0.3 too


def test_a_finer_estimate_at_the_same_pose_confirms_it():
    src, ref, truth = _posed()
    near = _slid(truth)
    near[:3, 3] += 0.2  # a hair from the slid pose: the same answer
    fine = _candidate(near, "metres", 1.0, 0.3, 0.99)
    coarse = _candidate(_slid(truth), "centimetres", 0.01, 5.0, 0.9)
    verdict = Verdict(best=coarse, registered=True, reason="")
    finer_reading_check(verdict, [fine, coarse], src, ref)
    assert verdict.registered, verdict.reason


def test_readings_at_one_voxel_and_coarser_ones_are_not_compared():
    src, ref, truth = _posed()
    coarse = _candidate(_slid(truth), "metres", 1.0, 0.3000000000000001, 0.9)
    same = _candidate(np.eye(4), "millimetres", 0.001, 0.3, 0.99)  # float noise apart
    coarser = _candidate(np.eye(4), "centimetres", 0.01, 5.0, 0.99)
    verdict = Verdict(best=coarse, registered=True, reason="")
    finer_reading_check(verdict, [coarse, same, coarser], src, ref)
    assert verdict.registered, verdict.reason


@pytest.mark.data
def test_a_mirrored_kitti_scan_is_not_registered_as_a_room_in_centimetres():
    """Found by ``tools/real_classes.py`` (seed 0, case 26): KITTI 04 frame 3 mirrored in x,
    under this motion, against frame 9 was refused in metres and registered in centimetres
    (as a 1.2 m room, fitting 86 % at the indoor setting's 5-unit voxel, 24 % at 0.3 m)."""
    from shared_paths import SHARED_DATA

    root = SHARED_DATA.parent / "train_data" / "kitti_seq00-07_semantickitti_mini"
    velodyne = root / "sequences" / "04" / "velodyne"
    if not velodyne.is_dir():
        pytest.skip(f"{velodyne} not found")

    def scan(frame: int) -> np.ndarray:
        path = velodyne / f"{frame:06d}.bin"
        return np.fromfile(path, np.float32).reshape(-1, 4)[:, :3].astype(np.float64)

    rot = Rotation.from_rotvec([1.2751686666967443, 0.2899309908602876, -0.28020238361278904])
    shift = np.array([0.0672995647029484, -0.07562189752123727, -0.40066853536880226])
    src = (scan(3) * np.array([-1.0, 1.0, 1.0])) @ rot.as_matrix().T + shift
    result = pcreg.register(src, scan(9))
    assert not result.registered
    # two rules refuse it: the estimate under the centimetres reading meets the reference on
    # its ground and facades only (0.5 % of its fit off their three planes: ambiguous, the
    # verdict's bare-planes rule, which now decides first), and it fits only loosely at the
    # coarser reading's voxel (the scale hold, unit-tested above)
    assert result.reason.startswith(
        ("units: the estimate under the centimetres reading", "ambiguous: the clouds meet only")
    ), result.reason


def _corner_in_mm(clutter: bool, seed: int = 0) -> np.ndarray:
    """A 5 x 4 m floor and two 2.7 m walls in millimetres, a point about every 25 mm; with
    ``clutter``, six boxes on the floor (what a real room's fit rests on besides planes)."""
    rng = np.random.default_rng(seed)
    n = 30000
    floor = np.column_stack([rng.uniform(0, 5000, n), rng.uniform(0, 4000, n), np.zeros(n)])
    wall_x = np.column_stack([np.zeros(n), rng.uniform(0, 4000, n), rng.uniform(0, 2700, n)])
    wall_y = np.column_stack([rng.uniform(0, 5000, n), np.zeros(n), rng.uniform(0, 2700, n)])
    parts = [floor, wall_x, wall_y]
    if clutter:
        for _ in range(6):
            lo = rng.uniform([500, 500, 0], [4000, 3000, 0])
            size = rng.uniform([300, 300, 300], [800, 800, 900])
            box = lo + rng.uniform(0, 1, (3000, 3)) * size
            face = rng.integers(0, 3, 3000)  # each point onto one of three faces of the box
            box[np.arange(3000), face] = (lo + size)[face]
            parts.append(box)
    return np.vstack(parts)


def _room_and_street(transform):
    """The room reading's estimate (millimetres, the indoor network's 5 cm: 50 units) and a
    street reading's at ``transform`` (centimetres, the outdoor network's 0.3 m: 30 units)."""
    room = _candidate(np.eye(4), "millimetres", 0.001, 50.0, 0.9)
    street = _candidate(transform, "centimetres", 0.01, 30.0, 0.95)
    street.features["outdoor"] = 1.0
    return room, street


def test_a_street_readings_answer_on_a_bare_room_corner_is_ambiguous():
    """A room in millimetres refused under the millimetre reading because its fit rests on a
    floor and walls was read next as a 50 m street in centimetres and registered wrong (fresh
    generated rooms: 4 of the 13 wrong answers the bare-planes rule left). At the room
    reading's voxel the street estimate rests on three planes: refused; with clutter it
    stands, and a room reading's own answer is not measured again."""
    corner = _corner_in_mm(clutter=False)
    room, street = _room_and_street(np.eye(4))
    verdict = Verdict(best=street, registered=True, reason="")
    room_reading_check(verdict, [room, street], corner, corner)
    assert not verdict.registered
    assert verdict.reason.startswith(
        "ambiguous: the clouds meet only on a floor and walls (0.0% of the fitted points lie "
        "off their three largest planes at the scale of the millimetres reading tried before"
    )
    assert verdict.reason.endswith("(if the clouds are in centimetres, --units centimetres "
                                   "says so)")  # fmt: skip
    cluttered = _corner_in_mm(clutter=True)
    room, street = _room_and_street(np.eye(4))
    verdict = Verdict(best=street, registered=True, reason="")
    room_reading_check(verdict, [room, street], cluttered, cluttered)
    assert verdict.registered, verdict.reason
    room, street = _room_and_street(np.eye(4))
    verdict = Verdict(best=room, registered=True, reason="")
    room_reading_check(verdict, [room, street], corner, corner)  # the verdict's own rule
    assert verdict.registered


def _box_room(seed: int = 0) -> np.ndarray:
    """A closed 6 x 4 x 3 m room (metres) with four 1 m blocks along one wall (15 % of it at
    5 cm): turned 180 deg about its vertical axis, its shell fits itself and its blocks land
    on empty floor."""
    from box_rooms import blocks, box_shell

    rng = np.random.default_rng(seed)
    return np.vstack([box_shell(rng, (6.0, 4.0, 3.0), 30_000),
                      blocks(rng, (0.3, 1.6, 2.9, 4.2), 1.0, 8000)])  # fmt: skip


def test_an_object_readings_answer_on_a_rooms_shell_is_ambiguous():
    """A whole room in metres refused under the metres reading (its fit rests on the shell)
    was read next as a 4 m object and registered wrong (a hostile run: 8 of 9 wrong answers
    on scanner stations of generated rooms came through another reading). At the metres
    reading's voxel the object estimate, the room turned 180 deg, fits its clutter 1 % as
    often as the whole: refused; at the truth it stands."""
    room_cloud = _box_room()
    turned = np.eye(4)
    turned[:2, :2] = -np.eye(2)
    turned[:2, 3] = [6.0, 4.0]
    verdicts = {}
    for name, transform in (("turned", turned), ("truth", np.eye(4))):
        room = _candidate(np.eye(4), "metres", 1.0, 0.05, 0.9)
        obj = _candidate(transform, "millimetres", 0.47, 0.05 / 0.47, 0.95)
        obj.features["object_reading"] = 1.0
        verdicts[name] = Verdict(best=obj, registered=True, reason="")
        room_reading_check(verdicts[name], [room, obj], room_cloud, room_cloud)
    assert verdicts["truth"].registered and verdicts["truth"].reason == ""
    assert not verdicts["turned"].registered
    assert verdicts["turned"].reason.startswith(
        "ambiguous: the fit rests on the room's shell at the scale of the metres reading tried "
        "before (the source's other points, "
    )
