"""The column-at-a-time reductions equal numpy's axis reductions exactly, in the input's dtype
(they replace ``a.min(0)``, ``a.max(0)`` and ``a.max(1)`` in the pipeline's hot paths)."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg.geometry.columns import column_max, column_min, row_max


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_column_and_row_reductions_equal_numpy_s(dtype):
    rng = np.random.default_rng(3)
    a = (rng.normal(size=(1000, 3)) * 1e3).astype(dtype)
    a[17, 1] = -5e4  # the extremes sit in different rows and columns
    a[900, 2] = 7e4
    for got, want in ((column_min(a), a.min(0)), (column_max(a), a.max(0)), (row_max(a), a.max(1))):
        assert got.dtype == a.dtype and got.shape == want.shape
        assert np.array_equal(got, want)
    assert column_min(a)[1] == -5e4 and column_max(a)[2] == 7e4


def test_one_point_and_wide_arrays():
    a = np.array([[3.0, -1.0, 2.0, 8.0]])
    assert column_min(a).tolist() == [3.0, -1.0, 2.0, 8.0] == column_max(a).tolist()
    assert row_max(a).tolist() == [8.0]
    strided = np.arange(40.0).reshape(10, 4)[::2, 1:]  # a view, not contiguous
    assert np.array_equal(column_min(strided), strided.min(0))
    assert np.array_equal(row_max(strided), strided.max(1))
