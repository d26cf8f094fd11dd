"""Registrar: batched inference equals pair-by-pair inference; numpy's BLAS kept to one
thread inside it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from pcreg.engine import inference
from pcreg.engine.inference import Registrar
from pcreg.engine.parallel import largest_first


def _three_pairs(room_pair) -> list[tuple[np.ndarray, np.ndarray]]:
    """Three different ``(ref, src)`` inputs: the pair, its source turned 90 deg, swapped."""
    src, ref, _ = room_pair
    rot = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    return [(ref, src), (ref, (src @ rot.T).astype(np.float32)), (src, ref)]


def test_batch_of_pairs_matches_one_pair_at_a_time(tiny_checkpoint, room_pair):
    pairs = _three_pairs(room_pair)
    reg = Registrar.from_checkpoint(tiny_checkpoint)
    single = [reg(r, s) for r, s in pairs]
    batched = reg.batch(pairs)
    assert len(batched) == 3
    for one, many in zip(single, batched, strict=True):
        np.testing.assert_allclose(many.transform, one.transform, atol=1e-4)
        assert many.src_corr_points.shape == one.src_corr_points.shape
        np.testing.assert_allclose(many.corr_scores, one.corr_scores, atol=1e-4)
    # the three estimates differ (different inputs), so equality above is not vacuous
    assert not np.allclose(batched[0].transform, batched[2].transform, atol=1e-3)
    assert reg.batch([]) == []


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_numpy_blas_is_single_threaded_inside_registration(tiny_checkpoint, room_pair, monkeypatch):
    """Its worker threads would otherwise spin on the cores torch needs (engine/threads.py)."""
    if not _blas_threads():
        pytest.skip("no BLAS library that threadpoolctl can see")
    src, ref, _ = room_pair
    reg = Registrar.from_checkpoint(tiny_checkpoint)
    seen = []
    ranking = inference.cube_hypothesis_scores

    def spy(*args, **kwargs):
        seen.append(_blas_threads())
        return ranking(*args, **kwargs)

    monkeypatch.setattr(inference, "cube_hypothesis_scores", spy)
    reg.model.config = dataclasses.replace(reg.config, orientation_search="manhattan")
    with threadpool_limits(limits=2, user_api="blas"):
        reg(ref, src)  # the search path
        assert seen and all(n == [1] * len(n) for n in seen)
        assert all(n == 2 for n in _blas_threads())  # the caller's setting is back
        captured = []
        forward = reg.model.forward

        def spy_forward(*args, **kwargs):
            captured.append(_blas_threads())
            return forward(*args, **kwargs)

        monkeypatch.setattr(reg.model, "forward", spy_forward)
        reg.forward([(ref, src)])  # the plain path
        assert captured and all(n == [1] * len(n) for n in captured)


def test_worker_pool_hands_out_the_largest_pairs_first():
    def pair(n_ref: int, n_src: int) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((n_ref, 3)), np.zeros((n_src, 3))

    pairs = [pair(10, 10), pair(30, 5), pair(1, 1), pair(20, 15), pair(5, 30)]
    # totals 20, 35, 2, 35, 35: the three of 35 in input order, then 20, then 2
    assert largest_first(pairs) == [1, 3, 4, 0, 2]
    assert largest_first([]) == []


def test_worker_processes_give_the_in_process_results(tiny_checkpoint, room_pair):
    # a smaller first pair: handed out last, its prediction must still come back first
    pairs = _three_pairs(room_pair)
    pairs = [(pairs[0][0][::2], pairs[0][1]), *pairs]
    assert largest_first(pairs) == [1, 2, 3, 0]
    reg = Registrar.from_checkpoint(tiny_checkpoint)
    single = [reg(r, s) for r, s in pairs]
    try:
        spread = reg.batch(pairs, workers=2)
        pool = reg._pool
        assert pool is not None and pool.workers == 2
        for one, other in zip(single, spread, strict=True):
            np.testing.assert_allclose(other.transform, one.transform, atol=1e-4)
            np.testing.assert_allclose(other.corr_scores, one.corr_scores, atol=1e-4)
            assert other.time_s > 0
        assert not np.allclose(spread[1].transform, spread[2].transform, atol=1e-3)
        reg.batch(pairs[:2], workers=2)
        assert reg._pool is pool  # reused
        # a changed configuration is a different model: a fresh pool that sees it
        reg.model.config = dataclasses.replace(reg.config, acceptance_radius=0.05)
        changed = reg.batch(pairs[:2], workers=2)
        assert reg._pool is not pool
        here = reg(*pairs[0])
        np.testing.assert_allclose(changed[0].transform, here.transform, atol=1e-4)
    finally:
        reg.close()
    assert reg._pool is None
    with pytest.raises(ValueError, match="workers"):
        reg.batch(pairs, workers=0)
