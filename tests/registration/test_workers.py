"""Worker processes: largest pairs first, the in-process results in input order."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg.registration.pipeline import Registration
from pcreg.registration.workers import WorkerPool, largest_first


def test_worker_pool_hands_out_the_largest_pairs_first():
    def pair(n_src: int, n_ref: int) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((n_src, 3)), np.zeros((n_ref, 3))

    pairs = [pair(10, 10), pair(30, 5), pair(1, 1), pair(20, 15), pair(5, 30)]
    # totals 20, 35, 2, 35, 35: the three of 35 in input order, then 20, then 2
    assert largest_first(pairs) == [1, 3, 4, 0, 2]
    assert largest_first([]) == []


def test_worker_processes_give_the_in_process_results(tiny_checkpoint, three_pairs):
    # a smaller first pair: handed out last, its result must still come back first
    pairs = [(three_pairs[0][0][::2], three_pairs[0][1]), *three_pairs]
    assert largest_first(pairs) == [1, 2, 3, 0]
    pipe = Registration(str(tiny_checkpoint))
    single = [pipe(s, r) for s, r in pairs]
    with WorkerPool(pipe, 2) as pool:
        spread = pool.map(pairs)
        assert pool.workers == 2
    for one, other in zip(single, spread, strict=True):
        np.testing.assert_allclose(other.transform, one.transform, atol=1e-4)
        np.testing.assert_allclose(other.corr_scores, one.corr_scores, atol=1e-4)
        assert other.time_s > 0
    assert not np.allclose(spread[1].transform, spread[2].transform, atol=1e-3)
    with pytest.raises(ValueError, match="workers"):
        WorkerPool(pipe, 0)


def test_workers_make_the_allocator_choice_of_the_process_that_starts_them(
    tiny_checkpoint, monkeypatch
):
    """The command line keeps freed memory in the heap (pcreg/engine/heap.py); its worker
    processes must too, or their large tensors page-fault anew (KITTI batches ~25 % slower)."""
    from pcreg.engine import heap

    pipe = Registration(str(tiny_checkpoint))
    for active in (True, False):
        monkeypatch.setattr(heap, "_active", active)
        with WorkerPool(pipe, 1) as pool:
            assert pool._executor.submit(heap.retaining).result() is active
