"""The digits split is stratified, deterministic and disjoint."""

from __future__ import annotations

import torch

from pcreg.data.vision.digits import load_digits_split, random_shift


def test_split_is_stratified_deterministic_and_disjoint():
    a = load_digits_split(seed=0)
    b = load_digits_split(seed=0)
    c = load_digits_split(seed=1)
    assert len(a.train_labels) == 1437 and len(a.test_labels) == 360
    assert torch.equal(a.test_images, b.test_images)
    assert not torch.equal(a.test_images, c.test_images)
    counts = torch.bincount(a.test_labels, minlength=10)
    assert counts.min() >= 35 and counts.max() <= 37  # 20% of each class (~180 per class)
    flat_train = {tuple(x.flatten().tolist()) for x in a.train_images}
    overlap = sum(tuple(x.flatten().tolist()) in flat_train for x in a.test_images)
    assert overlap <= 2  # only exact duplicate images in the raw data could coincide
    assert a.train_images.min() >= 0.0 and a.train_images.max() <= 1.0


def test_random_shift_moves_pixels_and_keeps_mass_inside(gen):
    img = torch.zeros(64, 1, 8, 8)
    img[:, 0, 3:5, 3:5] = 1.0
    out = random_shift(img, 1, gen)
    assert torch.all(out.sum((1, 2, 3)) == 4)  # a 2x2 blob in the middle never falls off
    assert len({tuple(o.nonzero()[0].tolist()) for o in out}) == 9  # all 9 offsets used
    assert torch.equal(random_shift(img, 0, gen), img)
