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
