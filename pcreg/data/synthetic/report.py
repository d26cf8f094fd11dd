"""Pictures of a generated dataset: sample pairs and the overlap histogram."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from pcreg._fs import atomic_output
from pcreg.data.synthetic.pairs import SyntheticPair

__all__ = ["save_overlap_histogram_png", "save_sample_pairs_png"]


def save_overlap_histogram_png(overlaps: list[float], path: str | os.PathLike[str],
                               title: str, overwrite: bool = True) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(overlaps, bins=np.linspace(0, 1, 21), color="tab:blue", edgecolor="white")
    for x, label in ((0.1, "LoMatch 10%"), (0.3, "Match 30%")):
        ax.axvline(x, color="k", ls="--", lw=1)
        ax.text(x + 0.01, ax.get_ylim()[1] * 0.9, label, fontsize=8)
    ax.set_xlabel("overlap (fraction of source points within 1.5 voxels)")
    ax.set_ylabel("pairs")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    with atomic_output(path, overwrite=overwrite) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return Path(path)


def save_sample_pairs_png(pairs: list[SyntheticPair], path: str | os.PathLike[str],
                          overwrite: bool = True) -> Path:
    from pcreg.viz.pairs import save_pair_grid_png

    rows = [(f"{p.scene} {p.ref_id}<-{p.src_id}, overlap {p.overlap:.2f}", p.ref, p.src,
             p.transform) for p in pairs]
    return save_pair_grid_png(path, rows, overwrite=overwrite)
