from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
import torch

from pcreg.ops import grid_subsample
from pcreg.ops.grid_subsample import GRID_PHASE


def numpy_grid_subsample(points: np.ndarray, lengths: list[int], voxel: float):
    """Straightforward reference: a dict from (cell) to the list of points, per item."""
    out, out_len, start = [], [], 0
    for n in lengths:
        item = points[start : start + n].astype(np.float64)
        start += n
        if n == 0:
            out_len.append(0)
            continue
        lo = item.min(axis=0)
        cells = defaultdict(list)
        for p in item:
            cells[tuple(np.floor((p - lo) / voxel + GRID_PHASE).astype(np.int64))].append(p)
        for key in sorted(cells):
            out.append(np.mean(cells[key], axis=0))
        out_len.append(len(cells))
    return np.array(out).reshape(-1, 3), out_len


@pytest.mark.parametrize("lengths", [[1], [500], [300, 0, 200], [50, 1000]])
@pytest.mark.parametrize("voxel", [0.05, 0.2])
@pytest.mark.parametrize("offset", [0.0, 100.0])
def test_matches_numpy_reference(lengths, voxel, offset, rng):
    pts = (rng.random((sum(lengths), 3)) * 2.0 + offset).astype(np.float32)
    got, got_len = grid_subsample(torch.from_numpy(pts), torch.tensor(lengths), voxel)
    want, want_len = numpy_grid_subsample(pts, lengths, voxel)
    assert got_len.tolist() == want_len
    assert got.dtype == torch.float32
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=2e-5 * max(1.0, offset))


def test_each_output_is_the_centroid_of_its_voxel():
    # the first cell spans [min - 0.0618, min + 0.0382) on each axis
    pts = torch.tensor([[0.01, 0.01, 0.01], [0.03, 0.04, 0.045], [0.95, 0.95, 0.95]])
    out, n = grid_subsample(pts, None, 0.1)
    assert n.tolist() == [2]
    torch.testing.assert_close(out, torch.tensor([[0.02, 0.025, 0.0275], [0.95, 0.95, 0.95]]))


def test_one_point_per_voxel_and_reduction(rng):
    pts = torch.from_numpy(rng.random((5000, 3)).astype(np.float32))
    out, n = grid_subsample(pts, torch.tensor([5000]), 0.25)
    # a 1 m cube over 5 cells per axis (the grid starts 0.618 cells before the minimum)
    assert int(n) == out.shape[0] == 125
    cells = torch.floor((out - pts.min(0).values) / 0.25 + GRID_PHASE)
    assert torch.unique(cells, dim=0).shape[0] == 125


def test_bad_arguments():
    with pytest.raises(ValueError, match="voxel_size"):
        grid_subsample(torch.rand(5, 3), None, 0.0)
    with pytest.raises(ValueError, match="sum\\(lengths\\)"):
        grid_subsample(torch.rand(5, 3), torch.tensor([4]), 0.1)
