"""FPFH + RANSAC with a cap on the matched source points: each kept point has the feature it
has in the whole cloud, and the capped search still finds the pose."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg.baselines.fpfh_ransac import _prepare, fpfh_ransac
from pcreg.geometry import pose_errors

pytest.importorskip("open3d")


def test_a_capped_source_keeps_each_points_own_feature(room_pair):
    src = room_pair[0].astype(np.float64)
    full, full_fpfh = _prepare(src, 0.05)
    n = len(full.points)
    sub, sub_fpfh = _prepare(src, 0.05, keep=n // 3, seed=7)
    assert len(sub.points) == n // 3 == sub_fpfh.data.shape[1]
    # the subset is a subset of the downsampled points, each with the same FPFH as in the
    # whole cloud (its neighbourhood is not thinned)
    pts, sub_pts = np.asarray(full.points), np.asarray(sub.points)
    index = {tuple(p): i for i, p in enumerate(pts)}
    rows = np.array([index[tuple(p)] for p in sub_pts])
    np.testing.assert_array_equal(np.asarray(sub_fpfh.data), np.asarray(full_fpfh.data)[:, rows])
    np.testing.assert_array_equal(np.asarray(sub.normals), np.asarray(full.normals)[rows])
    again, _ = _prepare(src, 0.05, keep=n // 3, seed=7)  # seeded: the same subset
    np.testing.assert_array_equal(np.asarray(again.points), sub_pts)
    whole, _ = _prepare(src, 0.05, keep=n + 1)  # a cap above the count keeps every point
    assert len(whole.points) == n


def test_the_capped_search_still_registers_the_room(room_pair):
    src, ref, gt = room_pair
    src, ref = src.astype(np.float64), ref.astype(np.float64)
    n = len(_prepare(src, 0.05)[0].points)
    capped = fpfh_ransac(src, ref, 0.05, max_queries=n // 3)
    # RANSAC's pose before ICP, judged as the zero-shot benchmark judges a registration
    # (the whole search's: 6.2 deg, RMSE 0.19 m; a third of the points: 6.0 deg, 0.17 m)
    diagonal = float(np.linalg.norm(np.ptp(ref, axis=0)))
    err = pose_errors(capped.transform, gt, src)
    assert err["rre_deg"] < 10.0 and err["rmse_m"] < 0.05 * diagonal, err
    # its correspondences come from the subset only
    sub = {tuple(p) for p in np.asarray(_prepare(src, 0.05, keep=n // 3)[0].points)}
    assert len(capped.src_corr_points) >= 3
    assert all(tuple(p) in sub for p in capped.src_corr_points)


def test_auto_caps_the_matched_points_outdoors_and_fpfh_ransac_alone_does_not(
    monkeypatch, room_pair
):
    """``auto``'s classical step matches at most the setting's ``classical_queries`` source
    points (outdoor 6,000, indoor all); ``--method fpfh-ransac`` (Open3D's recipe, the
    benchmarks' peer) matches all."""
    import time

    import pcreg.baselines
    from pcreg.api import pipeline
    from pcreg.registration.result import SETTINGS
    from pcreg.registration.steps import attempt

    asked = []
    real = pcreg.baselines.fpfh_ransac

    def spy(*args, **kwargs):
        asked.append(kwargs.get("max_queries"))
        return real(*args, **kwargs)

    monkeypatch.setattr(pcreg.baselines, "fpfh_ransac", spy)
    src, ref, _ = room_pair
    src, ref = src.astype(np.float64), ref.astype(np.float64)
    pipeline(None, method="fpfh-ransac")(src, ref)
    assert asked == [None]
    assert SETTINGS["outdoor"].classical_queries == 6000
    assert SETTINGS["indoor"].classical_queries is None
    pipe = pipeline(None, method="auto")
    for scale, want in ((1.0, None), (10.0, 6000)):  # the room, and the room as a 48 m site
        plan = pipe.plan(src * scale, ref * scale)
        assert plan.setting.name == ("indoor" if want is None else "outdoor")
        s, r, o = plan.clean(src * scale, ref * scale, np.zeros((2, 3)))
        asked.clear()
        found = attempt(pipe, plan, "classical", s, r, o, 1.0, time.perf_counter())
        assert asked == [want] and found


def _open3d_feature_matching(src, ref, voxel, iterations=100_000, seed=0):
    """Open3D's own ``registration_ransac_based_on_feature_matching`` with fpfh_ransac's
    settings: the reference for fpfh_ransac's features matched once, then RANSAC on them."""
    import open3d as o3d

    reg = o3d.pipelines.registration
    s, sf = _prepare(src, voxel)
    r, rf = _prepare(ref, voxel)
    dist = 1.5 * voxel
    o3d.utility.random.seed(seed)
    return reg.registration_ransac_based_on_feature_matching(
        s, r, sf, rf, False, dist, reg.TransformationEstimationPointToPoint(False), 3,
        [reg.CorrespondenceCheckerBasedOnEdgeLength(0.9),
         reg.CorrespondenceCheckerBasedOnDistance(dist)],
        reg.RANSACConvergenceCriteria(iterations, 0.999),
    )  # fmt: skip


def test_matching_once_gives_open3d_s_own_answer(room_pair):
    """The features matched once (Open3D's ``correspondences_from_features``), then RANSAC
    on those pairs: Open3D's feature-matching RANSAC to the bit (the same seed)."""
    src, ref, _ = room_pair
    src, ref = src.astype(np.float64), ref.astype(np.float64)
    ours = fpfh_ransac(src, ref, 0.05)
    theirs = _open3d_feature_matching(src, ref, 0.05)
    np.testing.assert_array_equal(ours.transform, np.asarray(theirs.transformation))
    assert ours.fitness == theirs.fitness
    # with a budget the pair runs as without one: its 100,000 iterations fit in it
    budgeted = fpfh_ransac(src, ref, 0.05, budget_s=1.0)
    np.testing.assert_array_equal(budgeted.transform, ours.transform)
    assert "ransac_probe" in budgeted.timings and "ransac_probe" not in ours.timings


def test_the_iteration_cap_follows_a_timed_run():
    """``iteration_cap``: the full cap unless the timed run's iterations are slow (every
    sample validated) and the whole run would exceed the budget; then the iterations that
    fit (a scripted RANSAC of known cost per iteration)."""
    import time

    from pcreg.baselines.fpfh_ransac import PROBE_ITERATIONS, iteration_cap

    def costing(seconds_each):
        calls = []

        def ransac(iterations):
            calls.append(iterations)
            time.sleep(iterations * seconds_each)

        return ransac, calls

    cheap, calls = costing(1e-6)  # 100,000 iterations: 0.1 s
    assert iteration_cap(cheap, 100_000, 1.0) == 100_000
    assert calls == [PROBE_ITERATIONS]
    # 40 us each (a real pair on a busy machine): 4 s in all, over the budget, not capped
    busy, _ = costing(40e-6)
    assert iteration_cap(busy, 100_000, 1.0) == 100_000
    # 100 us each but 20,000 iterations: 2 s, within a 3 s budget: not capped
    fits, _ = costing(1e-4)
    assert iteration_cap(fits, 20_000, 3.0) == 20_000
    dear, _ = costing(2e-4)  # a mirror image's 200 us: 20 s; 1 s holds about 5,000
    capped = iteration_cap(dear, 100_000, 1.0)
    assert 2_500 <= capped <= 5_000
    floor, _ = costing(1e-3)  # never under the timed run's own count
    assert iteration_cap(floor, 100_000, 0.01) == PROBE_ITERATIONS
    small, calls = costing(1e-3)  # a cap under the timed run's count: nothing timed
    assert iteration_cap(small, 500, 0.01) == 500 and calls == []


@pytest.mark.data
def test_an_object_against_its_mirror_image_stays_in_the_budget(shared_data):
    """Every 3-point sample of an object against its mirror image passes RANSAC's checkers
    (a triangle and its mirror image are congruent), so each iteration pays for a
    validation: the bunny's 1,889 mesh vertices (read as an object, x17) took 7.5 s for
    100,000 iterations. The budget caps the run."""
    import time

    import open3d as o3d

    bunny = shared_data / "stanford_bunny_teaser" / "bun_zipper_res3.ply"
    if not bunny.is_file():
        pytest.skip(f"{bunny} not found")
    obj = np.asarray(o3d.io.read_triangle_mesh(str(bunny)).vertices, np.float64) * 17.18
    mirror = obj * np.array([-1.0, 1.0, 1.0])
    t0 = time.perf_counter()
    res = fpfh_ransac(obj, mirror, 0.05, max_iterations=20_000)
    unbounded = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = fpfh_ransac(obj, mirror, 0.05, budget_s=0.3)
    took = time.perf_counter() - t0
    # the pathology is there (20,000 iterations alone take over the budget) and bounded
    assert unbounded > 0.6, unbounded
    spent = res.timings["ransac"] + res.timings["ransac_probe"]
    assert spent < 0.3 * 2 and took < unbounded, (res.timings, unbounded)
