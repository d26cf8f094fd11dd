"""Registrar (the network on ``(src, ref)`` pairs): batched inference equals pair-by-pair
inference, hypotheses reuse the reference's encoding without changing the result, and numpy's
BLAS is kept to one thread inside it."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from pcreg.registration import search as search_module
from pcreg.registration.loading import load_network
from pcreg.registration.search import OrientationSearch, SearchConfig


def test_batch_of_pairs_matches_one_pair_at_a_time(tiny_checkpoint, three_pairs):
    pairs = three_pairs
    reg = load_network(tiny_checkpoint).network
    single = [reg(s, r) for s, r in pairs]
    batched = reg.forward(pairs)
    assert len(batched) == 3
    for one, many in zip(single, batched, strict=True):
        np.testing.assert_allclose(many.transform, one.transform, atol=1e-4)
        assert many.src_corr_points.shape == one.src_corr_points.shape
        np.testing.assert_allclose(many.corr_scores, one.corr_scores, atol=1e-4)
    # the three estimates differ (different inputs), so equality above is not vacuous
    assert not np.allclose(batched[0].transform, batched[2].transform, atol=1e-3)
    assert reg.forward([]) == []


def test_hypotheses_equal_running_the_rotated_source_alone(tiny_checkpoint, room_pair):
    """The reference encoded once and reused for each rotated source gives what the plain
    forward pass gives on that rotated source, and each prediction is for the rotated one."""
    src, ref, _ = room_pair
    reg = load_network(tiny_checkpoint).network
    c, s = np.cos(0.4), np.sin(0.4)
    rots = np.stack([np.eye(3), np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])])
    hyps = reg.hypotheses(src, ref, rots)
    for rot, hyp in zip(rots, hyps, strict=True):
        # the same voxel grid, rotated: compare with the network on the rotated pyramid input
        plain = reg((src.astype(np.float64) @ rot.T), ref)
        assert hyp.src_corr_points.shape[1] == 3
        np.testing.assert_allclose(
            hyp.transform[:3, :3] @ hyp.transform[:3, :3].T, np.eye(3), atol=1e-4
        )
        if np.allclose(rot, np.eye(3)):
            np.testing.assert_allclose(hyp.transform, plain.transform, atol=1e-4)
            np.testing.assert_allclose(hyp.corr_scores, plain.corr_scores, atol=1e-4)
    assert not np.allclose(hyps[0].transform, hyps[1].transform, atol=1e-3)


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_numpy_blas_is_single_threaded_inside_registration(tiny_checkpoint, room_pair, monkeypatch):
    """Its worker threads would otherwise spin on the cores torch needs (engine/threads.py)."""
    if not _blas_threads():
        pytest.skip("no BLAS library that threadpoolctl can see")
    src, ref, _ = room_pair
    reg = load_network(tiny_checkpoint).network
    seen = []
    ranking = search_module.cube_hypothesis_scores

    def spy(*args, **kwargs):
        seen.append(_blas_threads())
        return ranking(*args, **kwargs)

    monkeypatch.setattr(search_module, "cube_hypothesis_scores", spy)
    search = OrientationSearch.from_config(reg, SearchConfig(orientation_search="manhattan"))
    with threadpool_limits(limits=2, user_api="blas"):
        search(src, ref)  # the search path
        assert seen and all(n == [1] * len(n) for n in seen)
        assert all(n == 2 for n in _blas_threads())  # the caller's setting is back
        captured = []
        forward = reg.model.forward

        def spy_forward(*args, **kwargs):
            captured.append(_blas_threads())
            return forward(*args, **kwargs)

        monkeypatch.setattr(reg.model, "forward", spy_forward)
        reg.forward([(src, ref)])  # the plain path
        assert captured and all(n == [1] * len(n) for n in captured)
