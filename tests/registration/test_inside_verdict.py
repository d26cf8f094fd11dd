"""The object-in-scene measurements read from the scene's side (:mod:`pcreg.registration.
inside_verdict`): a box standing on a floor, seen from one side, and a whole-box template."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy.spatial import cKDTree

from pcreg.registration.inside_verdict import (
    MAX_MARGIN,
    MAX_THROUGH,
    MIN_OBJECT_SHARE,
    MIN_VISIBLE_FIT,
    InsideSearch,
    inside_rule,
    object_share,
    visible_fit,
)

STEP = 0.005  # metres between samples
HALF = np.array([0.10, 0.075, 0.05])  # the box's half extents; it stands on z = 0


def _face(axis: int, sign: float) -> tuple[np.ndarray, np.ndarray]:
    """One face of the box: ``(points (N, 3), outward normals (N, 3))``."""
    u, v = [a for a in range(3) if a != axis]
    gu = np.arange(-HALF[u], HALF[u] + 1e-9, STEP)
    gv = np.arange(-HALF[v], HALF[v] + 1e-9, STEP)
    mu, mv = np.meshgrid(gu, gv)
    pts = np.zeros((mu.size, 3))
    pts[:, u], pts[:, v], pts[:, axis] = mu.ravel(), mv.ravel(), sign * HALF[axis]
    pts[:, 2] += HALF[2]
    normals = np.zeros_like(pts)
    normals[:, axis] = sign
    return pts, normals


def _box(faces) -> SimpleNamespace:
    got = [_face(a, s) for a, s in faces]
    return SimpleNamespace(points=np.concatenate([p for p, _ in got]),
                           normals=np.concatenate([n for _, n in got]))  # fmt: skip


ALL_FACES = [(a, s) for a in range(3) for s in (-1.0, 1.0)]
#: what a camera up and to the +x, +y side sees of the box
SEEN = [(2, 1.0), (0, 1.0), (1, 1.0)]


@pytest.fixture(scope="module")
def scene() -> np.ndarray:
    """A 1 m floor (no points under the box) and the box's seen faces."""
    g = np.arange(-0.5, 0.5 + 1e-9, STEP)
    fx, fy = np.meshgrid(g, g)
    floor = np.stack([fx.ravel(), fy.ravel(), np.zeros(fx.size)], 1)
    floor = floor[(np.abs(floor[:, 0]) > HALF[0]) | (np.abs(floor[:, 1]) > HALF[1])]
    return np.concatenate([floor, _box(SEEN).points])


@pytest.fixture(scope="module")
def template() -> SimpleNamespace:
    return _box(ALL_FACES)


def _size(template) -> float:
    return float(np.linalg.norm(np.ptp(template.points, axis=0)))


def test_a_template_at_its_place_explains_the_object_and_stands_on_the_floor(scene, template):
    """At the truth every off-floor point next to the template lies on it, though half the
    template (its far and bottom faces) fits nothing."""
    share, count, through = object_share(template.points, np.eye(4), scene, 2 * STEP,
                                         _size(template))  # fmt: skip
    assert share > 0.99 and count > 100
    assert through == 0.0


def test_a_template_sunk_into_the_floor_passes_through_it(scene, template):
    """Moved 4 cm down, a fifth of the box lies under the floor's points."""
    down = np.eye(4)
    down[2, 3] = -0.04
    _, _, through = object_share(template.points, down, scene, 2 * STEP, _size(template))
    assert through > MAX_THROUGH


def test_a_depth_cameras_thick_floor_is_removed_as_thick_as_it_is(scene, template):
    """A Kinect-class floor: its points spread 1 cm (one fine voxel, sd) about the plane. Taken
    at the fixed 1.5 voxels, the floor's noisy points next to the box counted as object
    points the template does not explain (share under the bar); measured, the band holds
    them. A different object on that floor is still short of the bar."""
    from pcreg.registration import inside_verdict as iv

    rng = np.random.default_rng(3)
    noisy = scene.copy()
    on_floor = noisy[:, 2] == 0.0
    noisy[on_floor, 2] += rng.normal(0.0, 0.01, on_floor.sum())
    voxel = 2 * STEP
    height = np.abs(noisy[:, 2])
    band = iv.plane_band(height, on_floor, voxel)
    assert 2.7 * voxel < band < 3.3 * voxel  # 3 sigma: 3 cm
    assert iv.plane_band(np.abs(scene[:, 2]), scene[:, 2] == 0.0, voxel) == iv.OBJECT_ON * voxel
    share, count, through = object_share(template.points, np.eye(4), noisy, voxel,
                                         _size(template))  # fmt: skip
    assert share > 0.99 and count > 100 and through == 0.0
    # passing through the floor is measured beyond its band, and a sunk object still does
    for sunk, passes in ((0.02, False), (0.06, True)):
        down = np.eye(4)
        down[2, 3] = -sunk
        _, _, through = object_share(template.points, down, noisy, voxel, _size(template))
        assert (through > MAX_THROUGH) == passes, (sunk, through)
    ball = rng.normal(size=(4000, 3))
    ball = ball / np.linalg.norm(ball, axis=1, keepdims=True) * 0.09 + [0, 0, HALF[2]]
    share, count, _ = object_share(ball, np.eye(4), noisy, voxel, _size(template))
    assert count > 30 and share < MIN_OBJECT_SHARE


def test_a_different_object_leaves_the_real_one_unexplained(scene, template):
    """A ball of the box's size at the box's place: most of the box's seen faces are off it."""
    rng = np.random.default_rng(0)
    ball = rng.normal(size=(4000, 3))
    ball = ball / np.linalg.norm(ball, axis=1, keepdims=True) * 0.09 + [0, 0, HALF[2]]
    share, count, _ = object_share(ball, np.eye(4), scene, 2 * STEP, _size(template))
    assert count > 30 and share < MIN_OBJECT_SHARE


def test_the_side_the_scene_sees_must_all_be_there(scene, template):
    """Every template point visible from the seen side fits; with half the top face missing
    from the scene (a different, shorter object there), a visible part of it fits nothing."""
    tree = cKDTree(scene)
    assert visible_fit(template, np.eye(4), tree, 2 * STEP, _size(template)) > 0.95
    cut = scene[~((scene[:, 2] > 2 * HALF[2] - 1e-6) & (scene[:, 0] < 0))]
    low = visible_fit(template, np.eye(4), cKDTree(cut), 2 * STEP, _size(template))
    assert low < MIN_VISIBLE_FIT


def _part(**kw) -> InsideSearch:
    values = dict(transform=np.eye(4), rival=None, fitness=0.55, contrast=0.4,
                  worst_contrast=0.2, margin=0.0, inliers=500, fine_voxel=0.01,
                  coarse_voxel=0.04, small_corr=np.zeros((0, 3)), large_corr=np.zeros((0, 3)),
                  object_share=1.0, object_points=200, through=0.0, visible_fit=1.0,
                  probe_margin=0.8, probe_share=0.7, part=True)  # fmt: skip
    values.update(kw)
    return InsideSearch(**values)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({}, ""),
        ({"fitness": 0.2}, "at best 20%"),
        ({"object_share": 0.9}, "90.0% lie on it"),
        ({"object_share": 0.975}, "97.5% lie on it (at least 98%"),
        ({"object_points": 10}, "10 object points"),
        ({"through": 0.05}, "beyond the surface it stands on"),
        ({"visible_fit": 0.8}, "only 80% fits"),
        ({"margin": 0.95}, "does not tell where it is"),
        ({"probe_margin": 1.02, "probe_share": 0.99}, "does not tell how it lies"),
        ({"probe_margin": 1.02, "probe_share": 0.97}, ""),
    ],
)
def test_the_part_rule_names_what_fails(change, words):
    """A template's answer is judged in part: each measurement refuses it on its own (another
    place that explains the object nearly as well, a turn that fits as well and explains it
    too), and a turn that fits as well but explains less of the object is no rival."""
    reason = inside_rule(_part(**change))
    assert (reason == "") if not words else (words in reason), reason


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({}, ""),
        ({"fitness": 0.85}, "at least 90% needed): it is not found"),
        ({"fitness": 0.67, "part_tried": True}, "as an object the scene sees in part"),
        ({"contrast": 0.2}, "not distinctive"),
        ({"object_share": 0.4}, "only 40% lie on it"),
        ({"object_share": 0.4, "object_points": 10}, ""),  # bare planes: nothing to explain
        ({"margin": 0.7}, "does not tell where it is"),
    ],
)
def test_the_whole_rule_names_what_fails(change, words):
    """A crop's answer is judged whole, from both sides: it fits, distinctively, the scene's
    object points next to it lie on it (a crop of another room fit 91 % of itself onto a
    corner of the scene, explaining 37 % of what stands there), no other pose fits as well."""
    values = dict(fitness=1.0, margin=0.3, object_share=0.9, part=False)
    values.update(change)
    reason = inside_rule(_part(**values))
    assert (reason == "") if not words else (words in reason), reason


def test_a_whole_answer_is_not_judged_in_part():
    """The same measurements as a whole answer: a 55 % fit is under the whole rule's floor."""
    assert "at least 90% needed" in inside_rule(_part(part=False))


def test_a_crop_of_one_of_two_copies_is_refused_and_not_retried_in_part():
    """Two identical objects in a scene and a crop around one: it fits whole at either copy
    (and slides along the wall it is cropped with). The whole rule's refusal stands: the part
    judgement is only for a small cloud that fits nowhere whole (it once registered the crop
    at the other copy)."""
    from pcreg.registration.inside import find_inside

    rng = np.random.default_rng(1)

    def box(lo, hi, n):
        lo, hi = np.asarray(lo, float), np.asarray(hi, float)
        ext = hi - lo
        areas = np.repeat([ext[1] * ext[2], ext[0] * ext[2], ext[0] * ext[1]], 2)
        faces = []
        for f, area in enumerate(areas):
            pts = rng.uniform(lo, hi, (int(n * area / areas.sum()), 3))
            pts[:, f // 2] = (lo if f % 2 == 0 else hi)[f // 2]
            faces.append(pts)
        return np.vstack(faces)

    def thing(at):
        body = np.vstack([box([0, 0, 0], [0.3, 0.2, 0.25], 5000),
                          box([0.3, 0, 0], [0.4, 0.08, 0.12], 1500)])  # fmt: skip
        return body[body[:, 2] > 0.002] + at

    floor = np.c_[rng.uniform(-2, 2, (150_000, 2)), np.zeros(150_000)]
    wall = np.c_[rng.uniform(-2, 2, 40_000), np.full(40_000, 2.0), rng.uniform(0, 2, 40_000)]
    scene = np.vstack([floor, wall, thing([-1.0, 0.0, 0.0]), thing([1.0, 0.5, 0.0])])
    scene += rng.normal(0, 0.001, scene.shape)
    crop = scene[np.linalg.norm(scene - [-0.8, 0.1, 0.1], axis=1) < 0.35]
    turn = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    found = find_inside(crop @ turn.T + [0.3, 0.2, 0.1], scene)
    assert found.fitness > 0.9 and not found.part
    assert found.margin > MAX_MARGIN and found.rival is not None  # the other copy: a rival
    assert inside_rule(found).startswith("object in scene: the fit is not distinctive")
