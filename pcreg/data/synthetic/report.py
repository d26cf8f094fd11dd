"""What the pictures of a generated dataset show: its overlaps and a few sample pairs.

This module only reads the dataset (``data`` never imports ``viz``, docs/architecture.md); the
layer that calls both draws the pictures from arrays::

    report = dataset_report(root, "indoor", "val", records, num_scenes)
    save_overlap_histogram_png(report.overlaps, report.overlap_png, report.title)  # pcreg.viz.pairs
    save_pair_grid_png(report.samples_png, report.samples)                        # pcreg.viz.pairs
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pcreg.data.threedmatch import load_fragment

__all__ = ["DatasetReport", "dataset_report"]


@dataclass(frozen=True)
class DatasetReport:
    """The pictures' inputs, as plain values, and where they go."""

    title: str  # "indoor val: 15 pairs from 4 scenes"
    overlaps: list[float]  # one per pair
    # (title, src (M, 3), ref (N, 3), T_ref_src (4, 4)): the rows of save_pair_grid_png
    samples: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]
    summary: str  # one line for the log
    overlap_png: Path  # <root>/<split>_overlap.png
    samples_png: Path  # <root>/<split>_samples.png


def _transform(record: dict) -> np.ndarray:
    if "transform" in record:  # outdoor
        return np.asarray(record["transform"], np.float64)
    t = np.eye(4)
    t[:3, :3], t[:3, 3] = np.asarray(record["rotation"]), np.asarray(record["translation"])
    return t


def dataset_report(
    root: str | os.PathLike[str],
    kind: str,
    split: str,
    records: list[dict],
    num_scenes: int,
    samples: int = 3,
    seed: int = 0,
) -> DatasetReport:
    """The overlaps of a dataset written by :mod:`pcreg.data.synthetic.writer` (``records``
    as it returned them) and ``samples`` of its pairs picked at random by ``seed``, loaded
    from disk."""
    if not records:
        raise ValueError(f"{kind} {split}: no pairs to report")
    root = Path(root)
    overlaps = [float(r["overlap"]) for r in records]
    base = root / "data" if kind == "indoor" else root
    picks = np.random.default_rng(seed).choice(
        len(records), min(samples, len(records)), replace=False
    )
    rows = []
    for i in picks:
        r = records[int(i)]
        scene = r.get("scene_name", f"street-{r.get('seq_id', 0):06d}")
        ref_id, src_id = (
            r.get("frag_id0", r.get("frame0", 0)),
            r.get("frag_id1", r.get("frame1", 0)),
        )
        rows.append(
            (
                f"{scene} {ref_id}<-{src_id}, overlap {r['overlap']:.2f}",
                load_fragment(base / r["pcd1"]),  # the source
                load_fragment(base / r["pcd0"]),  # the reference
                _transform(r),
            )
        )
    return DatasetReport(
        title=f"{kind} {split}: {len(records)} pairs from {num_scenes} scenes",
        overlaps=overlaps,
        samples=rows,
        summary=(
            f"{len(records)} pairs; overlap min {min(overlaps):.2f}, median "
            f"{np.median(overlaps):.2f}, max {max(overlaps):.2f}; pictures in {root}"
        ),
        overlap_png=root / f"{split}_overlap.png",
        samples_png=root / f"{split}_samples.png",
    )
