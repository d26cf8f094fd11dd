"""The mirror check (:mod:`pcreg.registration.mirror`): its rule on stand-in verdicts, and the
orientation search's estimate for the mirror image on a real pair (the frame bookkeeping)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from pcreg.errors import InputError
from pcreg.registration.mirror import CONGRUENT_FIT, REFLECTION, mirror_check, mirrored


def _verdict(fit: float, obj: bool = False, agreement: float = 0.1, setting: str = "indoor",
             fpfh: float = 0.0):  # fmt: skip
    """A registered stand-in verdict; ``fpfh``: its best estimate's ``from_fpfh`` and
    ``fpfh_alone`` (0: the network's orientation search made it)."""
    best = SimpleNamespace(features={"fitness": fit, "reverse_fitness": fit + 0.05,
                                     "agreement": agreement, "from_fpfh": fpfh,
                                     "fpfh_alone": fpfh},
                           result=SimpleNamespace(object=obj, setting=setting))  # fmt: skip
    return SimpleNamespace(registered=True, best=best, reason="", mirror=None)


def _fits(value: float | None, calls: list[int], agreement: float = 0.1):
    def fits(best):
        calls.append(1)
        return [] if value is None else [{"fitness": value, "reverse_fitness": value,
                                          "agreement": agreement}]  # fmt: skip

    return fits


def test_mirrored_is_a_reflection():
    pts = np.random.default_rng(0).normal(size=(20, 3))
    assert np.allclose(mirrored(pts), pts @ REFLECTION)
    assert np.allclose(mirrored(mirrored(pts)), pts)
    assert np.linalg.det(REFLECTION) == pytest.approx(-1.0)


def test_a_mirror_image_that_fits_better_refuses_the_registration():
    verdict, calls = _verdict(0.5), []
    mirror_check(verdict, _fits(0.95, calls))
    assert not verdict.registered and calls == [1]
    assert verdict.reason.startswith("mirror:") and "95 % against 50 %" in verdict.reason
    assert verdict.mirror == {"fit": 0.5, "mirror_fit": 0.95, "agreement": 0.1,
                              "mirror_agreement": 0.1}  # fmt: skip


@pytest.mark.parametrize("other", [0.3, 0.55, 0.77])
def test_a_mirror_image_that_fits_worse_or_not_whole_leaves_it_registered(other):
    """0.55 against 0.5: a box room fits its mirror image about as well as itself; 0.77: the
    mirror image of a right generated demo-room fragment (0.46) laid on the reference better,
    as another part of a mirror-symmetric room, but not whole (under 0.8)."""
    verdict, calls = _verdict(0.5), []
    mirror_check(verdict, _fits(other, calls))
    assert verdict.registered and verdict.reason == "" and calls == [1]
    assert verdict.mirror == {"fit": 0.5, "mirror_fit": other, "agreement": 0.1,
                              "mirror_agreement": 0.1}  # fmt: skip


def test_no_mirror_estimate_leaves_it_registered():
    verdict, calls = _verdict(0.5), []
    mirror_check(verdict, _fits(None, calls))
    assert verdict.registered
    assert verdict.mirror == {"fit": 0.5, "mirror_fit": None, "agreement": 0.1,
                              "mirror_agreement": None}  # fmt: skip


@pytest.mark.parametrize(
    ("other", "agreement", "refused"),
    [
        (0.55, 0.3, True),  # fits as well, the network agrees 3x as much: a mirrored scan
        (0.55, 0.15, False),  # 1.5x: right generated pairs' mirror images reach 0.96x
        (0.45, 0.3, False),  # fits less: a right generated pair's reached 2.2x at 0.86x
        (0.55, 0.05, False),  # 0.05 against 0.02: under the floor, too few matches to count
    ],
)
def test_a_mirror_image_the_network_agrees_with_far_more_refuses_it(other, agreement, refused):
    """The network's features are not mirror-symmetric: its matches agree with a mirrored
    scan's true counterpart (the mirror image's pose) 2.3-6.6x as much as with the pose of
    the scan as given, where right registrations' mirror images reach 0.96x at the same fit."""
    verdict, calls = _verdict(0.5, agreement=0.1 if agreement > 0.05 else 0.02), []
    mirror_check(verdict, _fits(other, calls, agreement))
    assert verdict.registered is not refused and calls == [1]
    if refused:
        assert verdict.reason.startswith("mirror:") and "agree with it 3.0x" in verdict.reason
        assert "55 % against 50 %" in verdict.reason


@pytest.mark.parametrize(("fpfh", "setting", "agreement"), [(1.0, "indoor", 0.1),
                                                            (0.0, "outdoor", 0.1),
                                                            (0.0, "indoor", 0.0)])  # fmt: skip
def test_the_agreement_rule_compares_like_with_like_indoors(fpfh, setting, agreement):
    """The mirror image's estimates here are the network's orientation search's: against an
    FPFH + RANSAC estimate (agreement: a network pass's matches at FPFH's pose), an outdoor
    one (not measured), or a source whose agreement is 0 (also: no network pass supported
    it), the agreement rule leaves the registration (the fit rule still applies)."""
    verdict, calls = _verdict(0.5, agreement=agreement, setting=setting, fpfh=fpfh), []
    mirror_check(verdict, _fits(0.55, calls, 0.3))
    assert verdict.registered and calls == [1]
    verdict = _verdict(0.5, fpfh=1.0)  # the same kind on both sides: refused
    found = [{"fitness": 0.55, "reverse_fitness": 0.55, "agreement": 0.3, "from_fpfh": 1.0,
              "fpfh_alone": 1.0}]  # fmt: skip
    mirror_check(verdict, lambda best: found)
    assert not verdict.registered and "3.0x as much" in verdict.reason


@pytest.mark.parametrize("case", ["congruent fit", "object", "not registered"])
def test_the_check_does_not_run_where_it_cannot_matter(case):
    verdict, calls = _verdict(CONGRUENT_FIT if case == "congruent fit" else 0.5), []
    if case == "object":
        verdict.best.result.object = True
    if case == "not registered":
        verdict.registered = False
    mirror_check(verdict, _fits(1.0, calls))
    assert calls == [] and verdict.mirror is None
    assert verdict.registered == (case != "not registered")


def test_a_refused_mirror_image_leaves_it_registered():
    verdict = _verdict(0.5)

    def refused(best):
        raise InputError("src", "too few points")

    mirror_check(verdict, refused)
    assert verdict.registered and verdict.mirror is None


@pytest.mark.data
def test_a_real_fragment_mirrored_onto_a_partner_it_overlaps_in_part_is_refused(shared_data):
    """3DMatch redkitchen fragment 6 mirrored in x, turned 55 deg and moved, against fragment
    5 (they overlap in part): the mirrored scan fitted 42 % both ways and registered; its
    mirror image (the scan as it was) fits 71 %, under the 80 % a mirror image must fit to
    refuse on the fit alone, and the network's matches agree with its pose 2.3x as much."""
    import pcreg
    from pcreg.bench.real_classes import _sources

    rooms = {name: (s, r) for name, s, r, _ in _sources(shared_data)["rooms"]}
    if "3DMatch 5<-6" not in rooms:
        pytest.skip("3DMatch fragments 5 and 6 absent")
    src, ref = rooms["3DMatch 5<-6"]
    a = np.radians(55.0)
    turn = np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0, 0, 1.0]])
    result = pcreg.register(mirrored(src) @ turn.T + [0.3, -0.2, 0.1], ref)
    assert not result.registered
    assert result.reason.startswith("mirror:") and "network's matches agree" in result.reason
    m = result.verdict.mirror
    assert m["mirror_fit"] < CONGRUENT_FIT and m["mirror_agreement"] > 2 * m["agreement"]


@pytest.mark.data
def test_the_search_estimates_the_mirror_image_in_its_own_frame(shared_data):
    """Searched on (a mirrored fragment, its reference), the search's mirror estimate is for
    the mirror of the mirror: the real fragment, whose true pose it must give."""
    from pcreg.registration.pipeline import Registration

    root = shared_data / "geotransformer_repo" / "demo"
    src, ref, gt = (np.load(root / f"{n}.npy").astype(np.float64) for n in ("src", "ref", "gt"))
    pipe = Registration()
    search = pipe.search_for(pipe.loaded("indoor"))
    found = search(mirrored(src), ref)
    pred = found.mirror(2)
    assert pred is not None  # the real fragment ranks above its mirror image: not screened
    rot = pred.transform[:3, :3]
    assert np.linalg.det(rot) == pytest.approx(1.0)
    angle = np.degrees(np.arccos(np.clip((np.trace(gt[:3, :3].T @ rot) - 1) / 2, -1, 1)))
    moved = src @ pred.transform[:3, :3].T + pred.transform[:3, 3]
    truth = src @ gt[:3, :3].T + gt[:3, 3]
    assert angle < 5.0 and np.sqrt(np.mean(np.sum((moved - truth) ** 2, 1))) < 0.15


def _asymmetric_room(seed: int = 0) -> np.ndarray:
    """A 6 x 4 x 3 m box room without two of its walls, with a 1 m cube in one corner and a
    2 x 0.5 m shelf along one wall: no mirror symmetry (points on the surfaces, 5 cm apart)."""
    rng = np.random.default_rng(seed)

    def face(origin, u, v, n):
        a, b = rng.uniform(0, 1, (2, n))
        return np.asarray(origin) + np.outer(a, u) + np.outer(b, v)

    parts = [
        face([0, 0, 0], [6, 0, 0], [0, 4, 0], 9600),  # floor
        face([0, 0, 0], [6, 0, 0], [0, 0, 3], 7200),  # wall y = 0
        face([0, 0, 0], [0, 4, 0], [0, 0, 3], 4800),  # wall x = 0
        face([1, 1, 0], [1, 0, 0], [0, 0, 1], 400),  # cube, y = 1 face
        face([1, 1, 1], [1, 0, 0], [0, 1, 0], 400),  # cube top
        face([2, 1, 0], [0, 1, 0], [0, 0, 1], 400),  # cube, x = 2 face
        face([4, 0, 1.5], [2, 0, 0], [0, 0.5, 0], 400),  # shelf
    ]
    return np.concatenate(parts)


@pytest.mark.parametrize("mirror", [False, True])
def test_the_ranking_screen_keeps_only_mirror_images_that_rank_as_high(mirror):
    """No data needed: the search's proposal for (a room turned by a cube rotation, the
    room) ranks the source's mirror image under the source and offers no rotation for it;
    for (the room mirrored and turned, the room) the mirror image is the room itself and
    ranks highest: its rotations are offered."""
    from scipy.spatial.transform import Rotation

    from pcreg.registration.search import ManhattanHypotheses

    room = _asymmetric_room()
    turn = Rotation.from_euler("z", 90, degrees=True).as_matrix()
    src = (mirrored(room) if mirror else room) @ turn.T + np.array([0.3, -0.2, 0.1])
    hyp = ManhattanHypotheses(0.05).propose(src, room)
    assert hyp is not None and hyp.rank_mirror is not None
    offered = hyp.rank_mirror(2)
    assert len(offered) == (2 if mirror else 0)


@pytest.mark.data
def test_the_ranking_screens_out_the_mirror_image_of_a_right_pair(shared_data, monkeypatch):
    """The real demo pair as given: its source's mirror image ranks under the source (0.91x),
    so the mirror check runs no network for it and the pair stays registered; with the screen
    off the same search estimates it."""
    import pcreg
    import pcreg.registration.search as search_module
    from pcreg.registration.mirror import MIRROR_RANK_RATIO
    from pcreg.registration.pipeline import Registration

    assert MIRROR_RANK_RATIO == 1.0
    root = shared_data / "geotransformer_repo" / "demo"
    src, ref = (np.load(root / f"{n}.npy").astype(np.float64) for n in ("src", "ref"))
    result = pcreg.register(src, ref)
    assert result.registered and result.verdict.mirror["mirror_fit"] is None
    pipe = Registration()
    search = pipe.search_for(pipe.loaded("indoor"))
    assert search(src, ref).mirror(2) is None
    monkeypatch.setattr(search_module, "MIRROR_RANK_RATIO", 0.0)
    assert search(src, ref).mirror(2) is not None


def test_a_registered_result_keeps_no_search_state_and_pickles(room_pair):
    """The mirror check reuses the search's pyramids through closures on the candidates; the
    returned result must hold none of them (Ray sends results between processes: the network
    holds a lock that does not pickle)."""
    import pickle

    import pcreg

    src, ref, _ = room_pair
    result = pcreg.register(src, ref)
    assert result.verdict.mirror is not None  # the check ran (a partial overlap)
    assert all(c.mirror is None for c in result.verdict.candidates)
    back = pickle.loads(pickle.dumps(result))
    assert np.allclose(back.transform, result.transform)


def test_a_mirror_refusal_is_not_undone_by_the_object_in_scene_search(monkeypatch):
    """From an extent ratio of 4 a pair the scene path does not register is searched as an
    object in a scene; a mirror refusal is final (that search has no mirror check)."""
    from pcreg.registration import auto, inside

    refused = SimpleNamespace(registered=False, verdict=SimpleNamespace(reason="mirror: ..."),
                              timings={"total": 0.0, "search": 0.0})  # fmt: skip
    found = SimpleNamespace(registered=True, verdict=None, timings={"total": 0.0})
    monkeypatch.setattr(auto, "_register_scene", lambda *a, **k: refused)
    monkeypatch.setattr(inside, "register_inside", lambda *a, **k: found)
    pipe = SimpleNamespace(model=None, units=None, strict=False)
    rng = np.random.default_rng(0)
    small, large = rng.uniform(0, 1, (500, 3)), rng.uniform(0, 6, (5000, 3))  # ratio ~6
    names, origins = ("src", "ref"), np.zeros((2, 3))
    assert auto.register_auto(pipe, small, large, names, origins, 0.0) is refused
    refused.verdict.reason = "no estimate is trustworthy"
    assert auto.register_auto(pipe, small, large, names, origins, 0.0) is found
