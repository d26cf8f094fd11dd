"""Registrar: batched inference equals pair-by-pair inference."""

from __future__ import annotations

import numpy as np

from pcreg.engine.inference import Registrar


def test_batch_of_pairs_matches_one_pair_at_a_time(tiny_checkpoint, room_pair):
    src, ref, _ = room_pair
    rot = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    pairs = [(ref, src), (ref, (src @ rot.T).astype(np.float32)), (src, ref)]
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
