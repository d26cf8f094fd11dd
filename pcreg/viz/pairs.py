"""Pictures of registration pairs from arrays: grids of pairs (reference, source, aligned)
rendered headless to one PNG, and the histogram of a dataset's overlaps."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pcreg.viz.figures import save_figure
from pcreg.viz.render import render_clouds
from pcreg.viz.style import REFERENCE_COLOR, SOURCE_COLOR

__all__ = ["save_overlap_histogram_png", "save_pair_grid_png"]


def save_pair_grid_png(
    path: str | os.PathLike[str],
    pairs: Sequence[tuple[str, np.ndarray, np.ndarray, np.ndarray]],
    *,
    overwrite: bool = True,
    max_points: int = 60000,
    seed: int = 0,
) -> Path:
    """One row per pair ``(title, src (M, 3), ref (N, 3), T_ref_src (4, 4))``: the reference
    (blue), the source (orange), both after moving the source by ``T_ref_src``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(seed)

    def thin(p: np.ndarray) -> np.ndarray:
        p = np.asarray(p, np.float64)
        return p[rng.choice(len(p), max_points, replace=False)] if len(p) > max_points else p

    fig, axes = plt.subplots(len(pairs), 3, figsize=(13, 3.6 * len(pairs)), squeeze=False)
    for row, (title, src, ref, t) in zip(axes, pairs, strict=True):
        ref, src = thin(ref), thin(src)
        moved = src @ t[:3, :3].T + t[:3, 3]
        images = [
            (f"reference ({len(ref):,} pts shown)", render_clouds([(ref, REFERENCE_COLOR)])),
            (f"source ({len(src):,} pts shown)", render_clouds([(src, SOURCE_COLOR)])),
            (
                "aligned by the ground truth",
                render_clouds([(moved, SOURCE_COLOR), (ref, REFERENCE_COLOR)]),
            ),
        ]
        for ax, (name, img) in zip(row, images, strict=True):
            ax.imshow(img)
            ax.set_axis_off()
            ax.set_title(name, fontsize=9)
        row[0].text(
            -0.05,
            0.5,
            title,
            transform=row[0].transAxes,
            rotation=90,
            va="center",
            ha="right",
            fontsize=9,
        )
    fig.tight_layout()
    return save_figure(fig, path, dpi=90, overwrite=overwrite)


def save_overlap_histogram_png(
    overlaps: Sequence[float], path: str | os.PathLike[str], title: str, overwrite: bool = True
) -> Path:
    """Histogram of pair overlaps (fractions in [0, 1]) with the 3DLoMatch (10 %) and 3DMatch
    (30 %) thresholds marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(list(overlaps), bins=np.linspace(0, 1, 21), color="tab:blue", edgecolor="white")
    for x, label in ((0.1, "LoMatch 10%"), (0.3, "Match 30%")):
        ax.axvline(x, color="k", ls="--", lw=1)
        ax.text(x + 0.01, ax.get_ylim()[1] * 0.9, label, fontsize=8)
    ax.set_xlabel("overlap (fraction of source points within 1.5 voxels)")
    ax.set_ylabel("pairs")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path, dpi=100, overwrite=overwrite)
