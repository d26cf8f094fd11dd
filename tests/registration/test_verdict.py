"""The one verdict over a search's candidates (``pcreg.registration.verdict``)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from pcreg.registration import verdict as V
from pcreg.registration.result import RegistrationResult
from pcreg.registration.verify import Verification

MODEL = V.VerdictModel(
    features=("contrast",), mean=np.zeros(1), scale=np.ones(1), weights=np.array([10.0]),
    bias=-5.0, threshold=0.9, rival=0.1, rival_floor=0.5, version="test",
)  # fmt: skip


def _cand(transform, contrast, inliers=500, corr=10):
    check = Verification(inliers, 1000, 0.075, contrast, 0.2)
    result = RegistrationResult(
        transform=np.asarray(transform, float), src_corr_points=np.zeros((corr, 3)),
        ref_corr_points=np.zeros((corr, 3)), corr_scores=np.ones(corr), method="geotransformer",
        model="indoor", setting="indoor", icp=True, voxel_size=0.05, verification=check,
    )  # fmt: skip
    return V.Candidate(result, {"contrast": contrast})


def _turned(deg, shift=0.0):
    t = np.eye(4)
    t[:3, :3] = Rotation.from_euler("z", deg, degrees=True).as_matrix()
    t[0, 3] = shift
    return t


CENTRE, DIAGONAL = np.zeros(3), 10.0


def test_model_scores_logistic_and_round_trips():
    assert MODEL.score({"contrast": 0.5}) == pytest.approx(0.5)
    assert MODEL.score({"contrast": 1.0}) == pytest.approx(1 / (1 + np.exp(-5)))
    again = V.VerdictModel.from_dict(json.loads(json.dumps(MODEL.to_dict())))
    assert again.score({"contrast": 0.8}) == pytest.approx(MODEL.score({"contrast": 0.8}))
    assert (again.threshold, again.rival, again.version) == (0.9, 0.1, "test")


def test_best_candidate_registers_alone():
    good, weak = _cand(np.eye(4), 0.95), _cand(_turned(90), 0.3)
    out = V.judge([weak, good], MODEL, CENTRE, DIAGONAL)
    assert out.registered and out.best is good and out.reason == ""
    assert out.candidates == [weak, good] and weak.score < 0.2 < 0.9 < good.score


def test_below_threshold_is_not_registered():
    out = V.judge([_cand(np.eye(4), 0.7)], MODEL, CENTRE, DIAGONAL)
    assert not out.registered and out.reason.startswith("no estimate is trustworthy")
    assert "1 estimate tried" in out.reason


def test_a_different_pose_nearly_as_well_supported_is_ambiguous():
    a, b = _cand(np.eye(4), 0.96), _cand(_turned(90), 0.95)
    out = V.judge([a, b], MODEL, CENTRE, DIAGONAL)
    assert not out.registered and out.reason.startswith("ambiguous: two poses 90.0 deg")
    assert out.best is a and out.rival is b
    assert out.to_dict()["rival"]["transform"] == b.transform.tolist()


def test_the_same_pose_twice_is_no_rival():
    # 5 deg and 0.4 (4 % of the diagonal) apart: the same answer
    a, b = _cand(np.eye(4), 0.96), _cand(_turned(5, 0.4), 0.95)
    assert V.judge([a, b], MODEL, CENTRE, DIAGONAL).registered
    # 0.6 apart (6 % of the diagonal): a different answer
    c, d = _cand(np.eye(4), 0.96), _cand(_turned(0, 0.6), 0.95)
    assert not V.judge([c, d], MODEL, CENTRE, DIAGONAL).registered


def test_a_rival_far_below_does_not_block():
    # a different pose scoring under best - rival (0.1) is no rival
    a, b = _cand(np.eye(4), 0.99), _cand(_turned(90), 0.7)
    assert V.judge([a, b], MODEL, CENTRE, DIAGONAL).registered


def test_too_few_inliers_or_correspondences_never_register():
    assert not V.judge([_cand(np.eye(4), 0.99, inliers=10)], MODEL, CENTRE, DIAGONAL).registered
    assert not V.judge([_cand(np.eye(4), 0.99, corr=2)], MODEL, CENTRE, DIAGONAL).registered
    assert not V.judge([], MODEL, CENTRE, DIAGONAL).registered


def test_pose_distance():
    deg, shift = V.pose_distance(np.eye(4), _turned(30), np.array([1.0, 0, 0]))
    assert deg == pytest.approx(30.0)
    assert shift == pytest.approx(2 * np.sin(np.radians(15)))


def test_shipped_model_is_fitted_and_complete():
    """The shipped verdict model scores every feature the search measures, was fitted (not
    the bootstrap), and both kinds load."""
    auto = V.load_verdict_model("auto")
    classical = V.load_verdict_model("classical")
    assert set(auto.features) <= set(V.FEATURES) and "probe_margin" in auto.features
    assert set(classical.features) <= set(V.FEATURES) and "agreement" not in classical.features
    assert auto.version.startswith("verdict-set") and 0.3 <= auto.threshold < 1.0
    assert auto.trees is not None or np.abs(auto.weights).sum() > 0
    assert np.all(auto.scale > 0)


def _surface(rng, n, box_only):
    """Points on a box's surface (symmetric), or the box with two bumps of different sizes on
    two faces (no symmetry); metres, about 1 m across."""
    pts = rng.uniform(-0.5, 0.5, (n, 3)) * [1.0, 0.7, 0.4]
    face = rng.integers(3, size=n)
    side = rng.choice([-1.0, 1.0], size=n)
    half = np.array([0.5, 0.35, 0.2])
    pts[np.arange(n), face] = side * half[face]
    if not box_only:
        for centre, radius in (([0.5, 0.2, 0.0], 0.25), ([-0.2, 0.35, 0.1], 0.12)):
            bump = rng.normal(size=(n // 3, 3))
            bump = bump / np.linalg.norm(bump, axis=1, keepdims=True) * radius + centre
            pts = np.vstack([pts, bump])
    return pts


@pytest.mark.parametrize(("box_only", "symmetric"), [(True, True), (False, False)])
def test_symmetry_probe_finds_the_other_pose_of_a_symmetric_scan(rng, box_only, symmetric):
    """A box fits as well turned 180 deg about its axes (margin near 1, the other pose
    returned); the box with two unequal bumps does not (margin well below 1)."""
    from pcreg.baselines.icp import downsample_with_normals

    pts = _surface(rng, 20000, box_only)
    voxel = 0.02
    src, ref = downsample_with_normals(pts, voxel), downsample_with_normals(pts, voxel)
    diagonal = float(np.linalg.norm(np.ptp(pts, axis=0)))
    margin, pose = V.symmetry_probe(src, ref, np.eye(4), voxel, pts.mean(axis=0), diagonal)
    if symmetric:
        assert margin > 0.9 and pose is not None
        deg, _ = V.pose_distance(pose, np.eye(4), pts.mean(axis=0))
        assert deg > 80  # a turn of the box, not the estimate again
    else:
        assert margin < 0.75, margin


def test_symmetry_probe_takes_pcreg_clouds_as_open3d_clouds(rng):
    """The pipeline's clouds (pcreg.geometry.clouds, no Open3D) give what Open3D clouds of the
    same points and normals give."""
    from pcreg.geometry.clouds import downsample_with_normals

    pts = _surface(rng, 20000, False)
    voxel = 0.02
    src, ref = downsample_with_normals(pts, voxel), downsample_with_normals(pts, voxel)
    turn = np.eye(4)
    turn[:3, :3] = Rotation.from_rotvec([0.0, 0.0, 0.05]).as_matrix()
    centre, diagonal = pts.mean(axis=0), float(np.linalg.norm(np.ptp(pts, axis=0)))
    ours = V.symmetry_probe(src, ref, turn, voxel, centre, diagonal)
    theirs = V.symmetry_probe(src.to_open3d(), ref.to_open3d(), turn, voxel, centre, diagonal)
    assert ours[0] == theirs[0] and ours[0] > 0
    np.testing.assert_array_equal(ours[1], theirs[1])


def test_a_probe_margin_over_the_model_s_makes_the_pair_ambiguous():
    model = V.VerdictModel(**{**MODEL.__dict__, "probe": 0.9})
    cand = _cand(np.eye(4), 0.99)
    other = _turned(180)
    cand.features["probe_margin"] = 0.95
    cand.result.verification = Verification(500, 1000, 0.075, 0.99, 0.2, probe_margin=0.95,
                                            probe_pose=other)  # fmt: skip
    out = V.judge([cand], model, CENTRE, DIAGONAL)
    assert not out.registered and out.reason.startswith("ambiguous: a pose 180.0 deg")
    assert np.allclose(out.rival_transform, other)
    cand.score, cand.features["probe_margin"] = 0.0, 0.85
    assert V.judge([cand], model, CENTRE, DIAGONAL).registered


def test_errors_against_a_matrix_that_is_not_a_pose_is_a_clean_input_error():
    from pcreg.errors import InputError

    result = _cand(np.eye(4), 0.9).result
    with pytest.raises(InputError, match=r"finite \(4, 4\) T_ref_src, got shape \(3, 3\)"):
        result.errors(np.eye(3))
    assert result.errors(np.eye(4))["rre_deg"] == pytest.approx(0.0)


def _corner_view(rng, n=20000):
    """The three faces of the 1.0 x 0.7 x 0.4 m box one corner shows (+x, +y, +z): a partial
    view whose principal axes are not the box's."""
    pts = _surface(rng, n, True)
    half = np.array([0.5, 0.35, 0.2])
    return pts[(np.abs(pts - half) < 1e-9).any(axis=1)]


def test_symmetry_probe_turns_a_partial_box_view_about_its_faces(rng, monkeypatch):
    """A corner view of a box against the whole box fits as well turned 180 deg about a face
    normal (the opposite corner). Turned about the view's principal axes only, the probe
    misses that pose; about its faces' normals it finds it."""
    from pcreg.geometry.clouds import downsample_with_normals

    box, view = _surface(rng, 40000, True), _corner_view(rng)
    # the view in a frame of its own: the estimate ``truth`` takes it back onto the box
    truth = np.eye(4)
    truth[:3, :3] = Rotation.from_euler("xyz", [20, -35, 70], degrees=True).as_matrix()
    truth[:3, 3] = [0.3, -1.2, 2.0]
    view = (view - truth[:3, 3]) @ truth[:3, :3]
    voxel = 0.02
    src, ref = downsample_with_normals(view, voxel), downsample_with_normals(box, voxel)
    centre, diagonal = view.mean(axis=0), float(np.linalg.norm(np.ptp(box, axis=0)))
    monkeypatch.setattr(V, "PROBE_FACE_AXES", False)
    without, _ = V.symmetry_probe(src, ref, truth, voxel, centre, diagonal)
    monkeypatch.setattr(V, "PROBE_FACE_AXES", True)
    margin, pose = V.symmetry_probe(src, ref, truth, voxel, centre, diagonal)
    assert margin > 0.9 and without < 0.8, (margin, without)
    deg, _ = V.pose_distance(pose, truth, centre)
    assert deg == pytest.approx(180.0, abs=3.0)
    # the other pose is the box's own half turn about one of its axes, after the truth
    turn = pose @ np.linalg.inv(truth)
    assert np.allclose(np.abs(turn[:3, :3]), np.diag(np.abs(np.diag(turn[:3, :3]))), atol=0.05)
    assert np.allclose(turn[:3, 3], 0.0, atol=0.02)  # about the box's centre (the origin)


def test_fit_constraint_is_near_zero_where_the_fit_slides(rng):
    """Two walls meeting in a vertical corner leave the slide along the corner free; the
    same walls with a floor and a block on it hold every direction."""
    from pcreg.geometry.clouds import downsample_with_normals

    n = 15000
    wall_x = np.c_[np.zeros(n), rng.uniform(0, 2, n), rng.uniform(0, 2, n)]
    wall_y = np.c_[rng.uniform(0, 2, n), np.zeros(n), rng.uniform(0, 2, n)]
    floor = np.c_[rng.uniform(0, 2, n), rng.uniform(0, 2, n), np.zeros(n)]
    block = rng.uniform(0, 0.4, (n, 3))  # a 0.4 m cube's surface, at (1.0, 0.8) on the floor
    face = rng.integers(3, size=n)
    block[np.arange(n), face] = np.where(rng.random(n) < 0.5, 0.0, 0.4)
    block += [1.0, 0.8, 0.0]
    voxel = 0.04
    corner = np.vstack([wall_x, wall_y])
    room = np.vstack([wall_x, wall_y, floor, block])
    slide = V.fit_constraint(*(downsample_with_normals(corner, voxel),) * 2, np.eye(4), voxel)
    held = V.fit_constraint(*(downsample_with_normals(room, voxel),) * 2, np.eye(4), voxel)
    assert slide < 0.005 and held > 0.03, (slide, held)


def test_the_probe_margin_is_per_family_and_round_trips():
    """An object whose turned self fits 0.9 as well is ambiguous under a 0.85 object margin;
    a room at 0.9 is not (its family's margin is inf, stored as null)."""
    model = V.VerdictModel(
        features=("contrast",), mean=np.zeros(1), scale=np.ones(1), weights=np.array([10.0]),
        bias=-5.0, threshold=0.9, rival=0.1, rival_floor=0.5, version="test", probe=0.85,
        probes={"objects": 0.85, "rooms": float("inf")},
    )  # fmt: skip
    again = V.VerdictModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert again.probes == {"objects": 0.85, "rooms": float("inf")}
    for fam, features, registered in (("objects", {"object_reading": 1.0}, False),
                                      ("rooms", {}, True)):  # fmt: skip
        cand = _cand(np.eye(4), 0.99)
        cand.features.update(features, probe_margin=0.9)
        cand.result.verification = Verification(
            500, 1000, 0.075, 0.99, 0.2, probe_margin=0.9, probe_pose=_turned(180)
        )
        assert V.family(cand.features) == fam
        out = V.judge([cand], again, CENTRE, DIAGONAL)
        assert out.registered is registered, (fam, out.reason)
        if not registered:
            assert out.reason.startswith("ambiguous: a pose 180.0 deg")
