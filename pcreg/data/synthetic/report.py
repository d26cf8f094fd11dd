"""Pictures of a generated dataset: sample pairs and the overlap histogram."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from pcreg._fs import atomic_output
from pcreg.data.synthetic.pairs import SyntheticPair

__all__ = ["save_overlap_histogram_png", "save_sample_pairs_png"]


def save_overlap_histogram_png(
    overlaps: list[float], path: str | os.PathLike[str], title: str, overwrite: bool = True
) -> Path:
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


def save_sample_pairs_png(
    pairs: list[SyntheticPair], path: str | os.PathLike[str], overwrite: bool = True
) -> Path:
    from pcreg.viz.pairs import save_pair_grid_png

    rows = [
        (f"{p.scene} {p.ref_id}<-{p.src_id}, overlap {p.overlap:.2f}", p.ref, p.src, p.transform)
        for p in pairs
    ]
    return save_pair_grid_png(path, rows, overwrite=overwrite)


def write_dataset_report(
    root: str | os.PathLike[str],
    kind: str,
    split: str,
    records: list[dict],
    num_scenes: int,
    samples: int = 3,
) -> str:
    """Write ``<root>/<split>_overlap.png`` and ``<root>/<split>_samples.png`` for a dataset
    written by :mod:`pcreg.data.synthetic.writer`; returns a one-line summary."""
    from pcreg.data.threedmatch import load_fragment

    root = Path(root)
    ovs = [r["overlap"] for r in records]
    save_overlap_histogram_png(
        ovs,
        root / f"{split}_overlap.png",
        f"{kind} {split}: {len(records)} pairs from {num_scenes} scenes",
    )
    base = root / "data" if kind == "indoor" else root
    picks = np.random.default_rng(0).choice(len(records), min(samples, len(records)), replace=False)
    rows = []
    for i in picks:
        r = records[int(i)]
        if "transform" in r:
            t = np.asarray(r["transform"])
        else:
            t = np.eye(4)
            t[:3, :3], t[:3, 3] = np.asarray(r["rotation"]), np.asarray(r["translation"])
        scene = r.get("scene_name", f"street-{r.get('seq_id', 0):06d}")
        rows.append(
            SyntheticPair(
                load_fragment(base / r["pcd0"]),
                load_fragment(base / r["pcd1"]),
                t,
                r["overlap"],
                scene,
                r.get("frag_id0", r.get("frame0", 0)),
                r.get("frag_id1", r.get("frame1", 0)),
            )
        )
    save_sample_pairs_png(rows, root / f"{split}_samples.png")
    return (
        f"{len(records)} pairs; overlap min {min(ovs):.2f}, median {np.median(ovs):.2f}, "
        f"max {max(ovs):.2f}; pictures in {root}"
    )
