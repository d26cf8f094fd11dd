"""The whole network: batching, the real 3DMatch demo pair, and learning on one pair."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pcreg.data.collate import collate_pairs
from pcreg.geometry.metrics import relative_rotation_error_deg, relative_translation_error
from pcreg.geometry.transforms import apply_transform
from pcreg.losses.total import LossConfig, build_targets, registration_loss
from pcreg.models.geotransformer import build_geotransformer, threedmatch_config

SMALL = dict(
    voxel_size=0.05,
    init_dim=16,
    group_norm=8,
    hidden_dim=64,
    coarse_dim=64,
    output_dim=64,
    num_points_in_patch=32,
    sinkhorn_iterations=50,
    sigma_d=0.4,
    acceptance_radius=0.2,
    neighbor_limits=(30, 30, 30, 30),
)


def _room(seed):
    from pcreg.demo import _room_pair

    src, ref, t = _room_pair(seed)
    return (
        torch.from_numpy(src).float(),
        torch.from_numpy(ref).float(),
        torch.from_numpy(t).float(),
    )


def _collate(cfg, srcs, refs, transforms=None):
    return collate_pairs(srcs, refs, cfg, transforms=transforms)


def test_batch_of_two_equals_two_singles():
    torch.manual_seed(0)
    cfg = threedmatch_config(**SMALL)
    model = build_geotransformer(cfg).eval()
    pairs = [_room(0), _room(1)]
    pairs[1] = (pairs[1][0][::2], pairs[1][1][::3], pairs[1][2])  # different sizes
    with torch.no_grad():
        both = model(*_fields(_collate(cfg, [p[0] for p in pairs], [p[1] for p in pairs])))
        singles = [model(*_fields(_collate(cfg, [p[0]], [p[1]]))) for p in pairs]
    for i, single in enumerate(singles):
        assert torch.allclose(both.transform[i], single.transform[0], atol=1e-4)
        n, m = int(single.ref_valid_c.sum()), int(single.src_valid_c.sum())
        assert torch.allclose(both.ref_feats_c[i, :n], single.ref_feats_c[0, :n], atol=1e-4)
        assert torch.allclose(both.src_feats_c[i, :m], single.src_feats_c[0, :m], atol=1e-4)
        # the same superpoint correspondences (near-equal scores may swap places in the order)
        pairs_b = set(
            zip(both.node_corr[i][0].tolist(), both.node_corr[i][1].tolist(), strict=True)
        )
        pairs_s = set(
            zip(single.node_corr[0][0].tolist(), single.node_corr[0][1].tolist(), strict=True)
        )
        assert pairs_b == pairs_s
        assert torch.allclose(both.node_corr[i][2], single.node_corr[0][2], atol=1e-5)
        # per superpoint pair, the same Sinkhorn scores (matched by pair, not by position)
        sel = (both.patch_batch == i).nonzero(as_tuple=True)[0]
        key_b = {
            p: int(k)
            for p, k in zip(
                zip(both.node_corr[i][0].tolist(), both.node_corr[i][1].tolist(), strict=True),
                sel,
                strict=True,
            )
        }
        for k, p in enumerate(
            zip(single.node_corr[0][0].tolist(), single.node_corr[0][1].tolist(), strict=True)
        ):
            assert torch.allclose(
                both.matching_scores[key_b[p]], single.matching_scores[k], atol=1e-4
            )

        def rows(x):
            return x[torch.argsort(x[:, 0] * 1e6 + x[:, 1] * 1e3 + x[:, 2])]

        assert torch.allclose(
            rows(both.ref_corr_points[i]), rows(single.ref_corr_points[0]), atol=1e-5
        )


def _fields(batch):
    return batch.pyramid, batch.feats, batch.batch_size


@pytest.mark.data
def test_real_demo_pair_forward_backward_without_nan(shared_data):
    demo = shared_data / "geotransformer_repo" / "demo"
    src = torch.from_numpy(np.load(demo / "src.npy")).float()
    ref = torch.from_numpy(np.load(demo / "ref.npy")).float()
    gt = torch.from_numpy(np.load(demo / "gt.npy")).float()
    torch.manual_seed(0)
    cfg = threedmatch_config(
        init_dim=16,
        group_norm=8,
        hidden_dim=64,
        coarse_dim=64,
        output_dim=64,
        sinkhorn_iterations=30,
    )
    model = build_geotransformer(cfg)
    batch = _collate(cfg, [src], [ref], [gt])
    # inference: no ground truth anywhere
    model.eval()
    with torch.no_grad():
        out = model(*_fields(batch))
    assert torch.isfinite(out.transform).all()
    assert torch.allclose(
        out.transform[0, :3, :3] @ out.transform[0, :3, :3].T, torch.eye(3), atol=1e-4
    )
    assert out.ref_corr_points[0].shape[0] > 0
    assert not torch.isnan(out.matching_scores).any()
    # training step: targets from the ground truth, outside forward
    model.train()
    targets, sampled = build_targets(
        batch.pyramid,
        1,
        batch.transforms,
        cfg.num_points_in_patch,
        LossConfig(),
        torch.Generator().manual_seed(0),
    )
    assert len(targets[0].overlaps) > 50 and targets[0].overlaps.max() > 0.5
    out = model(*_fields(batch), node_correspondences=sampled)
    losses = registration_loss(out, batch.transforms, targets, LossConfig())
    assert all(torch.isfinite(v) and v > 0 for v in losses.values())
    losses["loss"].backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert model.matcher.optimal_transport.alpha.grad.abs() > 0


@pytest.mark.slow
def test_training_on_one_synthetic_pair_learns_to_register_it():
    torch.manual_seed(0)
    cfg = threedmatch_config(**SMALL)
    lc = LossConfig(matching_radius=0.1)
    src, ref, t = _room(0)
    batch = _collate(cfg, [src], [ref], [t])
    model = build_geotransformer(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(300):
        targets, sampled = build_targets(batch.pyramid, 1, batch.transforms, 32, lc, gen)
        out = model(*_fields(batch), node_correspondences=sampled)
        loss = registration_loss(out, batch.transforms, targets, lc)["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        out = model(*_fields(batch))
    r, s = out.ref_corr_points[0], out.src_corr_points[0]
    inlier_ratio = (torch.linalg.norm(apply_transform(s, t) - r, dim=-1) < 0.1).float().mean()
    assert inlier_ratio > 0.5
    assert relative_rotation_error_deg(out.transform[0], t) < 2.0
    assert relative_translation_error(out.transform[0], t) < 0.05
