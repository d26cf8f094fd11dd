from __future__ import annotations

import numpy as np
import pytest
import torch

from pcreg.ops import build_pyramid, calibrate_neighbor_limits, grid_subsample, radius_search


def surface_cloud(gen, n=3000, size=2.0):
    """Points on the floor and two walls of a room corner, 2.5 cm-ish spacing."""
    pts = torch.rand(n, 3, generator=gen) * size
    pts[: n // 3, 2] = 0.0
    pts[n // 3 : 2 * n // 3, 0] = 0.0
    pts[2 * n // 3 :, 1] = 0.0
    return grid_subsample(pts, None, 0.025)[0]


def test_pyramid_structure(gen):
    a, b = surface_cloud(gen), surface_cloud(gen, 2000, 1.5)
    points = torch.cat([a, b])
    lengths = torch.tensor([len(a), len(b)])
    limits = [20, 25, 30, 35]
    pyr = build_pyramid(
        points, lengths, num_stages=4, voxel_size=0.025, radius=0.0625, neighbor_limits=limits
    )
    assert len(pyr.points) == 4 and len(pyr.subsampling) == 3 and len(pyr.upsampling) == 3
    for i in range(4):
        n_i = pyr.points[i].shape[0]
        assert int(pyr.lengths[i].sum()) == n_i
        assert pyr.neighbors[i].shape == (n_i, limits[i])
        assert int(pyr.neighbors[i].max()) <= n_i  # shadow index = n_i
        # Every point is its own nearest neighbor.
        assert torch.equal(pyr.neighbors[i][:, 0], torch.arange(n_i))
        if i > 0:
            assert n_i < pyr.points[i - 1].shape[0]
    for i in range(3):
        assert pyr.subsampling[i].shape == (pyr.points[i + 1].shape[0], limits[i])
        assert pyr.upsampling[i].shape == (pyr.points[i].shape[0], limits[i + 1])
        # Nearest upsampling always finds a coarse point (centroids are within 2 r of members).
        assert (pyr.upsampling[i][:, 0] < pyr.points[i + 1].shape[0]).all()
        # Pooling never crosses batch items.
        q_item = torch.repeat_interleave(torch.arange(2), pyr.lengths[i + 1])
        s_item = torch.repeat_interleave(torch.arange(2), pyr.lengths[i])
        idx = pyr.subsampling[i]
        real = idx < pyr.points[i].shape[0]
        assert torch.equal(s_item[idx[real]], q_item[:, None].expand_as(idx)[real])


def test_batched_pyramid_equals_singles(gen):
    a, b = surface_cloud(gen), surface_cloud(gen, 1500, 1.0)
    kw = dict(num_stages=3, voxel_size=0.025, radius=0.0625, neighbor_limits=[16, 16, 16])
    both = build_pyramid(torch.cat([a, b]), torch.tensor([len(a), len(b)]), **kw)
    one = build_pyramid(a, torch.tensor([len(a)]), **kw)
    for i in range(3):
        n_a = one.points[i].shape[0]
        torch.testing.assert_close(both.points[i][:n_a], one.points[i])
        shadow_both = both.points[i].shape[0]
        idx = both.neighbors[i][:n_a]
        idx = torch.where(idx == shadow_both, torch.full_like(idx, n_a), idx)
        assert torch.equal(idx, one.neighbors[i])


def test_calibration_covers_requested_fraction(gen):
    clouds = [surface_cloud(gen) for _ in range(3)]
    limits = calibrate_neighbor_limits(
        clouds, num_stages=3, voxel_size=0.025, radius=0.0625, coverage=0.8
    )
    assert len(limits) == 3 and all(v >= 1 for v in limits)
    counts = []
    for c in clouds:
        nb = radius_search(c, c, 0.0625)
        counts.append((nb.indices < len(c)).sum(1))
    counts = torch.cat(counts).numpy()
    assert np.mean(counts <= limits[0]) >= 0.8
    assert np.mean(counts <= limits[0] - 1) < 0.8  # the smallest such limit


def test_calibration_on_tiny_clouds_is_never_zero():
    tiny = [torch.tensor([[0.0, 0.0, 0.0], [5.0, 5.0, 5.0]])]
    assert calibrate_neighbor_limits(tiny, num_stages=4, voxel_size=0.025, radius=0.0625) == [1] * 4
    with pytest.raises(ValueError, match="at least one sample"):
        calibrate_neighbor_limits([], num_stages=2, voxel_size=0.1, radius=0.2)


def _valid_rows(index: torch.Tensor, shadow: int) -> tuple[list[int], list[int]]:
    """Each row's entries below ``shadow`` in their order, as (all of them row after row, the
    count per row): equal for two tables exactly when their rows' valid entries are."""
    valid = index < shadow
    return index[valid].tolist(), valid.sum(dim=1).tolist()


def test_pyramid_items_equals_the_pyramid_built_for_those_items_alone(gen):
    from pcreg.ops.pyramid import pyramid_items

    clouds = [surface_cloud(gen, 2000, 1.5), surface_cloud(gen), surface_cloud(gen, 2500, 1.8)]
    kw = dict(num_stages=4, voxel_size=0.025, radius=0.0625, neighbor_limits=[20, 25, 30, 35])
    joint = build_pyramid(torch.cat(clouds), torch.tensor([len(c) for c in clouds]), **kw)
    for start, stop in [(0, 1), (1, 3), (2, 3)]:
        part = pyramid_items(joint, start, stop)
        alone = build_pyramid(
            torch.cat(clouds[start:stop]),
            torch.tensor([len(c) for c in clouds[start:stop]]),
            **kw,
        )
        for i in range(4):
            n_i = alone.points[i].shape[0]
            assert torch.equal(part.points[i], alone.points[i])
            assert torch.equal(part.lengths[i], alone.lengths[i])
            assert int(part.neighbors[i].max()) <= n_i  # the shadow is re-based too
            assert _valid_rows(part.neighbors[i], n_i) == _valid_rows(alone.neighbors[i], n_i)
        for i in range(3):
            n_i, n_next = alone.points[i].shape[0], alone.points[i + 1].shape[0]
            assert _valid_rows(part.subsampling[i], n_i) == _valid_rows(alone.subsampling[i], n_i)
            assert _valid_rows(part.upsampling[i], n_next) == _valid_rows(
                alone.upsampling[i], n_next
            )
    with pytest.raises(ValueError, match="out of a pyramid of 3"):
        pyramid_items(joint, 2, 4)
