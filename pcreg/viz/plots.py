"""Matplotlib figures written atomically to PNG: training curves and attention maps."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from pcreg.viz.figures import save_figure

__all__ = ["save_attention_rollout_png", "save_training_curves_png"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_training_curves_png(
    history: Mapping[str, Sequence[float]],
    path: str | os.PathLike[str],
    *,
    x_key: str = "epoch",
    panels: Sequence[Sequence[str]] | None = None,
    title: str = "",
    overwrite: bool = True,
) -> Path:
    """Plot ``history[key]`` against ``history[x_key]``; one panel per group of keys.

    ``panels`` defaults to one panel of every ``*loss*`` key and one of the rest.
    """
    plt = _pyplot()
    keys = [k for k in history if k != x_key]
    if panels is None:
        losses = [k for k in keys if "loss" in k]
        others = [k for k in keys if "loss" not in k]
        panels = [p for p in (losses, others) if p]
    x = np.asarray(history[x_key])
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, group in zip(axes[0], panels, strict=False):
        for key in group:
            y = np.asarray(history[key], dtype=float)
            keep = np.isfinite(y)  # keys measured only now and then (NaN elsewhere) still join up
            ax.plot(x[keep], y[keep], label=key, marker="." if keep.sum() < 30 else None)
        ax.set_xlabel(x_key)
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110, overwrite=overwrite)


def save_attention_rollout_png(
    images: np.ndarray,
    relevance: np.ndarray,
    labels: Sequence[int],
    predictions: Sequence[int],
    path: str | os.PathLike[str],
    *,
    overwrite: bool = True,
) -> Path:
    """Each image beside its attention-rollout map (upsampled to the image, overlaid).

    Args:
        images: ``(B, H, W)`` grey images in [0, 1].
        relevance: ``(B, g, g)`` rollout relevance of each patch for the class token.
    """
    from scipy.ndimage import zoom

    plt = _pyplot()
    b, h, w = images.shape
    cols = min(b, 6)
    rows = int(np.ceil(b / cols))
    fig, axes = plt.subplots(2 * rows, cols, figsize=(1.9 * cols, 4.0 * rows), squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    for i in range(b):
        r, c = 2 * (i // cols), i % cols
        rel = relevance[i] / max(float(relevance[i].max()), 1e-12)
        up = np.kron(rel, np.ones((h // rel.shape[0], w // rel.shape[1])))
        ok = labels[i] == predictions[i]
        axes[r, c].imshow(images[i], cmap="gray_r", vmin=0, vmax=1, interpolation="nearest")
        axes[r, c].set_title(
            f"true {labels[i]} / pred {predictions[i]}", fontsize=8, color="k" if ok else "r"
        )
        axes[r + 1, c].imshow(up, cmap="inferno", vmin=0, vmax=1, interpolation="nearest")
        # the digit's outline (half-intensity contour of the smoothly upsampled image)
        fine = zoom(images[i], 8, order=1)
        yy, xx = np.mgrid[0 : fine.shape[0], 0 : fine.shape[1]]
        axes[r + 1, c].contour(
            (xx + 0.5) / 8 - 0.5,
            (yy + 0.5) / 8 - 0.5,
            fine,
            levels=[0.5],
            colors="c",
            linewidths=1.0,
        )
        axes[r + 1, c].set_title("rollout (cyan: digit)", fontsize=8)
    fig.suptitle("attention rollout: where the class token looks (bright = more)", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110, overwrite=overwrite)
