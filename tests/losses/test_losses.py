"""Targets and losses against hand-made cases."""

from __future__ import annotations

import torch

from pcreg.geometry.transforms import apply_transform, invert_transform, random_transform
from pcreg.losses import (
    NodeTargets,
    node_targets,
    overlap_aware_circle_loss,
    point_matching_labels,
    point_matching_loss,
    sample_node_targets,
)
from pcreg.ops.partition import Patches, point_to_node_partition


def _patches(points, nodes, k):
    node_valid, idx, valid = point_to_node_partition(points, nodes, k)
    padded = torch.cat([points, points.new_zeros(1, 3)])
    return Patches(nodes, node_valid, idx, valid, padded[idx], points)


def test_node_targets_of_a_moved_copy_pair_each_node_with_itself(gen):
    pts = torch.rand(400, 3, generator=gen, dtype=torch.float64) * torch.tensor(
        [4.0, 4.0, 0.2], dtype=torch.float64
    )
    nodes = pts[torch.randperm(400, generator=gen)[:12]]
    t = random_transform(gen, dtype=torch.float64, max_translation=3.0)
    inv = invert_transform(t)
    ref = _patches(pts, nodes, 64)
    src = _patches(apply_transform(pts, inv), apply_transform(nodes, inv), 64)
    tg = node_targets(src, ref, t, positive_radius=0.02)
    best = torch.full((12,), -1)
    for r, s, o in zip(
        tg.ref_indices.tolist(), tg.src_indices.tolist(), tg.overlaps.tolist(), strict=True
    ):
        if r == s:
            assert abs(o - 1.0) < 1e-12  # identical patches overlap fully
            best[r] = s
    assert torch.equal(best, torch.arange(12))
    assert torch.all(tg.overlaps[tg.ref_indices != tg.src_indices] < 1.0)
    # under a wrong transform the self-pairs lose their overlap
    wrong = node_targets(src, ref, torch.eye(4, dtype=torch.float64), 0.02)
    self_pairs = wrong.ref_indices == wrong.src_indices
    assert wrong.overlaps[self_pairs].sum() < 12 * 0.5


def test_sample_node_targets_threshold_and_cap():
    t = NodeTargets(torch.arange(10) + 1, torch.arange(10), torch.linspace(0.0, 0.9, 10))
    si, ri = sample_node_targets(t, 100, 0.35, torch.Generator().manual_seed(0))
    assert sorted(ri.tolist()) == [4, 5, 6, 7, 8, 9] and torch.equal(si, ri + 1)
    _, ri = sample_node_targets(t, 3, 0.35, torch.Generator().manual_seed(0))
    assert len(ri) == 3 and set(ri.tolist()) <= {4, 5, 6, 7, 8, 9}


def test_point_matching_labels_and_loss():
    ref = torch.tensor([[[0.0, 0, 0], [1, 0, 0], [5, 5, 5]]])
    src = torch.tensor([[[1.0, 0, 0], [0.01, 0, 0], [9, 9, 9]]])
    valid_r = torch.tensor([[True, True, True]])
    valid_s = torch.tensor([[True, True, False]])
    labels = point_matching_labels(src, ref, valid_s, valid_r, torch.eye(4)[None], 0.05)
    expected = torch.zeros(1, 4, 4, dtype=torch.bool)
    expected[0, 0, 1] = expected[0, 1, 0] = True  # the two matches
    expected[0, 2, 3] = True  # ref point 2 has no partner -> dustbin column
    assert torch.equal(labels, expected)  # the padded source point is labelled nowhere
    log_p = torch.log(torch.full((1, 4, 4), 0.25))
    assert torch.isclose(
        point_matching_loss(log_p, src, ref, valid_s, valid_r, torch.eye(4)[None], 0.05),
        -torch.log(torch.tensor(0.25)),
    )


def test_circle_loss_prefers_matching_features(gen):
    n = 16
    feats = torch.nn.functional.normalize(torch.randn(1, n, 32, generator=gen), dim=-1)
    valid = torch.ones(1, n, dtype=torch.bool)
    targets = [NodeTargets(torch.arange(n), torch.arange(n), torch.full((n,), 0.8))]
    matched = overlap_aware_circle_loss(feats.clone(), feats, valid, valid, targets)
    shuffled = overlap_aware_circle_loss(
        feats[:, torch.randperm(n, generator=gen)], feats, valid, valid, targets
    )
    assert matched < shuffled
    src = feats.clone().requires_grad_(True)
    loss = overlap_aware_circle_loss(src, feats, valid, valid, targets)
    loss.backward()
    assert src.grad.abs().sum() > 0
    none = [
        NodeTargets(
            torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), torch.zeros(0)
        )
    ]
    assert overlap_aware_circle_loss(feats, feats, valid, valid, none) == 0
