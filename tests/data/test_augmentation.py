"""Augmentation keeps ref = T src, draws only from the given generator."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg.data.transforms import (
    AugmentationConfig,
    augment_pair,
    crop_by_plane,
    random_rotation_matrix,
    rotate_source,
)


def _pair(rng):
    src = rng.uniform(-2, 2, size=(500, 3)).astype(np.float32)
    r = random_rotation_matrix(rng)
    t = np.eye(4)
    t[:3, :3], t[:3, 3] = r, [1.0, -2.0, 0.5]
    ref = (src @ r.T + t[:3, 3]).astype(np.float32)
    return src, ref, t


@pytest.mark.parametrize(
    "cfg",
    [
        AugmentationConfig(noise=0.0),
        AugmentationConfig(rotation_axis="z", tilt_deg=2.0, noise=0.0, scale=(0.95, 1.05)),
    ],
)
def test_augmented_pairs_keep_the_ground_truth(rng, cfg):
    src, ref, t = _pair(rng)
    s2, r2, t2 = augment_pair(src, ref, t, cfg, np.random.default_rng(5))
    moved = s2 @ t2[:3, :3].T + t2[:3, 3]
    assert np.abs(moved - r2).max() < 1e-4
    assert np.abs(s2 - src).max() > 0.1  # it did move the source
    assert np.allclose(t2[:3, :3] @ t2[:3, :3].T, np.eye(3), atol=1e-9)


def test_rotations_are_proper_and_axis_restricted(rng):
    for _ in range(20):
        r = random_rotation_matrix(rng)
        assert np.allclose(r @ r.T, np.eye(3)) and np.isclose(np.linalg.det(r), 1.0)
        rz = random_rotation_matrix(rng, axis="z")
        assert np.allclose(rz[:, 2], [0, 0, 1]) and np.allclose(rz[2], [0, 0, 1])
    angles = [
        np.degrees(np.arccos((np.trace(random_rotation_matrix(rng, 30.0)) - 1) / 2))
        for _ in range(200)
    ]
    assert max(angles) <= 30.0 + 1e-6 and min(angles) < 5.0


def test_rotate_source_about_centroid(rng):
    src, _ref, t = _pair(rng)
    r = random_rotation_matrix(rng)
    s2, _ = rotate_source(src, t, r)
    assert np.allclose(s2.mean(0), src.mean(0), atol=1e-5)


def test_crop_and_determinism(rng):
    pts = rng.normal(size=(1000, 3))
    kept = crop_by_plane(pts, 0.7, np.random.default_rng(1))
    assert abs(len(kept) - 700) <= 2
    a = augment_pair(
        *_pair(np.random.default_rng(3)), AugmentationConfig(crop=0.7), np.random.default_rng(9)
    )
    b = augment_pair(
        *_pair(np.random.default_rng(3)), AugmentationConfig(crop=0.7), np.random.default_rng(9)
    )
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    with pytest.raises(ValueError, match="axis"):
        random_rotation_matrix(rng, axis="x")


def test_manhattan_canonicalization_leaves_a_small_rotation_and_the_ground_truth(room_pair):
    src, ref, t = room_pair  # the source was moved by a large random motion
    assert np.degrees(np.arccos((np.trace(t[:3, :3]) - 1) / 2)) > 20.0
    cfg = AugmentationConfig(rotation_deg=10.0, noise=0.0, canonicalize="manhattan")
    s2, r2, t2 = augment_pair(src, ref, t, cfg, np.random.default_rng(2))
    angle = np.degrees(np.arccos(np.clip((np.trace(t2[:3, :3]) - 1) / 2, -1, 1)))
    assert angle < 10.0 + 3.0  # the augmentation's rotation plus the frames' residual
    # as many moved source points land on a reference point as under the original truth
    from scipy.spatial import cKDTree

    def overlap(r, s, tr):
        return np.mean(cKDTree(r).query(s @ tr[:3, :3].T + tr[:3, 3])[0] < 0.05)

    before = overlap(ref, src, t)
    assert before > 0.3
    assert overlap(r2, s2, t2) == pytest.approx(before, abs=0.02)
    with pytest.raises(ValueError, match="canonicalize"):
        bad = AugmentationConfig(canonicalize="gravity")
        augment_pair(src, ref, t, bad, np.random.default_rng(0))
