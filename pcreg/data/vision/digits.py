"""scikit-learn's bundled handwritten digits (UCI optdigits test set: 1797 real 8x8 images,
values 0-16) with a fixed stratified split, and a pixel-shift augmentation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["DigitsSplit", "load_digits_split", "random_shift"]


@dataclass(frozen=True)
class DigitsSplit:
    """Images ``(N, 1, 8, 8)`` float32 in [0, 1], labels ``(N,)`` int64, for train and test."""

    train_images: Tensor
    train_labels: Tensor
    test_images: Tensor
    test_labels: Tensor


def load_digits_split(seed: int = 0, test_fraction: float = 0.2) -> DigitsSplit:
    """Stratified split of the 1797 digits: ``test_fraction`` of every class goes to test,
    chosen by ``seed`` (the same seed always gives the same split)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    data = load_digits()
    images = (data.images / 16.0).astype(np.float32)[:, None]
    labels = data.target.astype(np.int64)
    idx_train, idx_test = train_test_split(
        np.arange(len(labels)), test_size=test_fraction, stratify=labels, random_state=seed
    )
    t = torch.from_numpy
    return DigitsSplit(
        t(images[idx_train]), t(labels[idx_train]), t(images[idx_test]), t(labels[idx_test])
    )


def random_shift(images: Tensor, max_shift: int, generator: torch.Generator) -> Tensor:
    """Translate each image by an integer offset in ``[-max_shift, max_shift]`` per axis,
    filling with zeros (background). ``images (B, C, H, W)``."""
    if max_shift <= 0:
        return images
    b, _, h, w = images.shape
    padded = F.pad(images, (max_shift,) * 4)
    offsets = torch.randint(0, 2 * max_shift + 1, (b, 2), generator=generator)
    out = torch.empty_like(images)
    for i, (dy, dx) in enumerate(offsets.tolist()):
        out[i] = padded[i, :, dy : dy + h, dx : dx + w]
    return out
