"""Objects in scenes (``method="auto"``, extents 10-50x apart): found where they are, refused
where they are not. Generated cases (:mod:`pcreg.data.synthetic.inside`) from seed 1,000,000
on: the rule's thresholds were measured on seeds below 1,000."""

from __future__ import annotations

import numpy as np
import pytest

import pcreg
from pcreg.data.synthetic.inside import inside_case
from pcreg.errors import InputError
from pcreg.registration.checks import cloud_extent
from pcreg.registration.inside_hypotheses import ransac_hypotheses
from pcreg.registration.verdict import pose_distance

SEED = 1_000_000


def _right(result, case, src) -> bool:
    """Rotation within 5 deg, the small cloud's centre within 10 % of its extent."""
    truth = case.transform if src is case.src else np.linalg.inv(case.transform)
    deg, shift = pose_distance(result.transform, truth, src.mean(axis=0))
    return deg < 5.0 and shift < 0.1 * min(cloud_extent(case.src), cloud_extent(case.ref))


@pytest.fixture(scope="module")
def crop():
    return inside_case(SEED + 1, "crop")


@pytest.mark.parametrize("seed", [SEED + 701])
def test_a_template_the_whole_search_misses_is_found_through_its_views(seed, monkeypatch):
    """A whole-object template whose own FPFH found no right pose at any place (its outline's
    features take in its far side, which the scan lacks): one of its rendered views finds it,
    and it registers right. Without the views it is refused."""
    import pcreg.registration.inside as inside

    case = inside_case(seed, "template")
    result = pcreg.register(case.src, case.ref)
    assert result.registered, result.reason
    assert _right(result, case, case.src), result.transform
    t = result.timings  # the search's stages, the views among them, lie inside it
    assert t["views"] > 0 and t["places"] + t["poses"] + t["views"] + t["verify"] <= t["search"]
    monkeypatch.setattr(inside, "VIEW_PLACES", 0)  # the same search without the views
    assert not pcreg.register(case.src, case.ref).registered


@pytest.mark.parametrize("swap", [False, True])
def test_an_object_cropped_from_a_scene_registers_either_way(crop, swap):
    """A 0.2-0.5 m crop of a room scan, resampled and moved, 12-20x smaller than the room:
    refused before as 'scales differ by more than 10x'."""
    src, ref = (crop.ref, crop.src) if swap else (crop.src, crop.ref)
    result = pcreg.register(src, ref)
    assert result.registered, result.reason
    assert result.method_used == "object-in-scene" and result.units == "metres"
    assert _right(result, crop, src), result.transform
    assert result.to_dict()["readings"][0]["inside"] is True
    t = result.timings  # the object-in-scene search's stages lie inside its search
    assert t["load"] + t["search"] + t["checks"] == pytest.approx(t["total"], abs=1e-6)
    assert t["places"] + t["poses"] <= t["search"], t


def test_an_object_in_a_scene_in_millimetres_reports_in_its_units(crop):
    """The same crop and room in millimetres: the same pose (translation x1000), read as
    millimetres, the indoor setting (a 4 m room, not a 4,000 m street), the 10 cm inlier
    radius as 100 mm, and errors in metres equal to the metres pair's."""
    metres = pcreg.register(crop.src, crop.ref)
    mm = pcreg.register(crop.src * 1000, crop.ref * 1000)
    assert mm.registered and (mm.units, mm.setting) == ("millimetres", "indoor"), mm.reason
    assert mm.inlier_radius == pytest.approx(100.0) and metres.inlier_radius == 0.1
    assert np.allclose(mm.transform[:3, :3], metres.transform[:3, :3], atol=1e-3)
    gt_mm = crop.transform.copy()
    gt_mm[:3, 3] *= 1000
    err_mm, err_m = mm.errors(gt_mm, crop.src * 1000), metres.errors(crop.transform, crop.src)
    assert err_mm["rmse_m"] == pytest.approx(err_m["rmse_m"], rel=0.2, abs=2e-4)
    assert err_mm["inlier_ratio"] > 0.9 and err_m["inlier_ratio"] > 0.9


def test_a_whole_object_template_registers_on_the_side_the_scene_sees():
    """A surface sample of the whole object (what a CAD model gives), moved, against a room
    whose cameras saw part of it: about half of it fits, so it is judged in part (the
    scene's object points lie on it, the side the scene sees is all there) and registered
    right; refused before as 'at best 5x% of the small cloud fits'."""
    case = inside_case(SEED + 4, "template")
    result = pcreg.register(case.src, case.ref)
    assert result.registered, result.reason
    assert result.method_used == "object-in-scene"
    assert _right(result, case, case.src), result.transform
    features = result.verdict.best.features
    assert features["part"] == 1.0 and features["fitness"] < 0.9
    assert features["object_share"] >= 0.95 and features["visible_fit"] >= 0.9


def test_strict_refuses_what_one_path_alone_found(crop):
    """``--strict`` wants two independent paths to agree; the object-in-scene search is one."""
    result = pcreg.register(crop.src, crop.ref, strict=True)
    assert not result.registered and "--strict" in result.reason, result.reason


@pytest.mark.parametrize("kind", ["absent", "other-room", "slab"])
def test_what_is_not_in_the_scene_is_not_registered(kind):
    """A different object, a crop of another room, a thin sheet that fits any wall."""
    case = inside_case(SEED + 2, kind)
    result = pcreg.register(case.src, case.ref)
    assert not result.registered, result.transform
    assert result.method_used == "object-in-scene"
    assert result.reason.startswith(("object in scene", "ambiguous")), result.reason


def test_beyond_50x_the_units_must_differ(crop):
    """A crop 1000x smaller (the room in millimetres against metres) is still refused, and
    the message says what auto searched."""
    with pytest.raises(InputError, match=r"scales differ by more than 10x.*up to 50x smaller"):
        pcreg.register(crop.src, crop.ref * 1000.0)


def test_ransac_hypotheses_keeps_the_true_pose_first(rng):
    """Half the correspondences right: the best-supported hypothesis is the truth."""
    from scipy.spatial.transform import Rotation

    src = rng.uniform(-1, 1, (200, 3))
    truth = np.eye(4)
    truth[:3, :3] = Rotation.random(random_state=5).as_matrix()
    truth[:3, 3] = [3.0, -1.0, 2.0]
    ref = src @ truth[:3, :3].T + truth[:3, 3]
    corr = np.stack([np.arange(200), np.arange(200)], 1)
    corr[::2, 1] = rng.permutation(200)[:100]  # half of them wrong
    poses, support = ransac_hypotheses(src, ref, corr, 0.01, rng, samples=2000)
    assert len(poses) > 10 and support[0] >= 100 and np.all(np.diff(support) <= 0)
    assert np.allclose(poses[0], truth, atol=1e-6)


def _trials(kind: str) -> tuple[int, int]:
    """20 trials (seeds 1,000,100-1,000,119): how many registered right, and wrong."""
    good = wrong = 0
    for seed in range(SEED + 100, SEED + 120):
        case = inside_case(seed, kind)
        result = pcreg.register(case.src, case.ref)
        ok = _right(result, case, case.src)
        good += int(result.registered and ok)
        wrong += int(result.registered and not ok)
    return good, wrong


@pytest.fixture(scope="module")
def template_trials() -> tuple[int, int]:
    return _trials("template")


@pytest.mark.slow
def test_objects_cropped_from_scenes_register_in_nine_trials_of_ten():
    """Right and registered in at least 90 % of 20 trials, and never registered wrong."""
    good, wrong = _trials("crop")
    assert wrong == 0
    assert good >= 18, f"{good}/20 registered right"


@pytest.mark.slow
def test_templates_never_register_wrong(template_trials):
    """A whole-object template, judged in part: whatever it misses, it never registers a
    wrong pose (14 of these 20 right on 2026-11-27; 15 with the rendered views, 2026-11-29)."""
    good, wrong = template_trials
    assert wrong == 0
    assert good >= 13, f"{good}/20 registered right"


@pytest.mark.slow
@pytest.mark.xfail(
    reason="a whole-object template, judged in part: 15/20 registered right, none wrong "
    "(2026-11-29, with the rendered views; 14/20 before them); near-symmetric generated "
    "objects are refused as ambiguous (BENCHMARKS.md, 'Where the templates fail')",
    raises=AssertionError,
    strict=True,
)
def test_templates_register_in_nine_trials_of_ten(template_trials):
    good, _ = template_trials
    assert good >= 18, f"{good}/20 registered right"
