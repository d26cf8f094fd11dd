"""Backbone input features: the constant, and FPFH (rotation invariant, per cloud).

They live in :mod:`pcreg.ops.features` (floor 0, used by data and models alike);
:mod:`pcreg.data.features` re-exports them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pcreg.data.collate import collate_pairs
from pcreg.geometry import random_rotation
from pcreg.models.geotransformer import GeoTransformerConfig
from pcreg.ops.features import INPUT_FEATURE_DIMS, fpfh_features, input_features


def _box_corner(gen: torch.Generator, n: int = 1500) -> torch.Tensor:
    """Three perpendicular planes (a room corner) with a little noise: FPFH sees flat parts,
    edges and the corner."""
    u = torch.rand(n, 2, generator=gen)
    face = torch.randint(0, 3, (n,), generator=gen)
    pts = torch.zeros(n, 3)
    for f in range(3):
        m = face == f
        axes = [a for a in range(3) if a != f]
        pts[m, axes[0]], pts[m, axes[1]] = u[m, 0], u[m, 1]
    return pts + 0.002 * torch.randn(n, 3, generator=gen)


def test_ones_is_the_constant():
    pts = torch.rand(10, 3)
    out = input_features(pts, torch.tensor([4, 6]), "ones")
    assert out.shape == (10, 1) and torch.all(out == 1)


def test_fpfh_is_normalised_per_sub_histogram_and_per_cloud(gen):
    a, b = _box_corner(gen), _box_corner(gen, 900) + 10.0
    out = input_features(torch.cat([a, b]), torch.tensor([len(a), len(b)]), "fpfh", (0.1, 0.25))
    assert out.shape == (len(a) + len(b), INPUT_FEATURE_DIMS["fpfh"])
    assert torch.all(out[:, 0] == 1)
    sums = out[:, 1:].reshape(-1, 3, 11).sum(-1)
    assert torch.allclose(sums, torch.ones_like(sums), atol=1e-3)
    # computed per cloud: the second cloud's features do not see the first (10 m away anyway)
    alone = fpfh_features(b.numpy(), 0.1, 0.25)
    assert np.allclose(out[len(a) :, 1:].numpy(), alone, atol=1e-5)
    # a flat face and the corner get different histograms
    fa = out[: len(a)]
    flat = fa[(a[:, 0] > 0.4) & (a[:, 1] > 0.4) & (a[:, 2].abs() < 0.01), 1:]
    corner = fa[(a < 0.05).sum(1) >= 2, 1:][: len(flat)]
    assert len(flat) > 20 and len(corner) > 20
    assert (flat.mean(0) - corner.mean(0)).abs().sum() > 0.2


def test_fpfh_does_not_change_under_rotation(gen):
    pts = _box_corner(gen)
    rot = random_rotation(gen)
    f0 = fpfh_features(pts.numpy(), 0.1, 0.25)
    f1 = fpfh_features((pts @ rot.T + torch.tensor([1.0, -2.0, 0.5])).numpy(), 0.1, 0.25)
    diff = np.abs(f0 - f1).sum(1)  # L1 over the 3 sub-histograms (each sums to 1: max 6)
    assert np.median(diff) < 0.05
    # while a different surface is far away in feature space
    other = fpfh_features((pts * torch.tensor([1.0, 1.0, 0.3])).numpy(), 0.1, 0.25)
    assert np.median(np.abs(f0 - other).sum(1)) > 5 * np.median(diff)


def test_unknown_kind_and_wrong_width_are_rejected():
    from pcreg.models.geotransformer import GeoTransformerConfig, build_geotransformer

    with pytest.raises(ValueError, match="input_features must be one of"):
        input_features(torch.rand(4, 3), torch.tensor([4]), "shot")
    with pytest.raises(ValueError, match="needs input_dim 34"):
        build_geotransformer(GeoTransformerConfig(input_features="fpfh"))


def test_collate_passes_fpfh_through(gen):
    a, b = _box_corner(gen, 800), _box_corner(gen, 700)
    cfg = GeoTransformerConfig(
        voxel_size=0.05, num_stages=2, init_radius=2.5, neighbor_limits=(20, 20),
        input_features="fpfh", input_dim=34, fpfh_radii=(0.1, 0.25),
    )  # fmt: skip
    assert cfg.search_radius == 0.125
    batch = collate_pairs([a], [b], cfg, backend="torch")
    n = int(batch.pyramid.lengths[0].sum())
    assert batch.feats.shape == (n, 34) and batch.feats[:, 1:].sum() > 0


def test_data_features_re_exports_the_ops_definitions():
    from pcreg.data import features

    assert features.INPUT_FEATURE_DIMS is INPUT_FEATURE_DIMS
    assert features.input_features is input_features and features.fpfh_features is fpfh_features
