"""The real pairs of ``../shared/data`` that the benchmarks use, as file paths with their ground
truth: 3DMatch redkitchen 0<-6 (GeoTransformer's demo) and 0<-5, KITTI 00 95<-94 and 199<-198."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["RealPair", "real_pairs"]


@dataclass
class RealPair:
    """A real pair on disk: ``gt`` is ``T_ref_src`` (4, 4) as nested lists."""

    name: str
    setting: str  # "indoor" | "outdoor"
    src: str
    ref: str
    gt: list


def real_pairs(shared_data: Path) -> list[RealPair]:
    """The real 3DMatch (redkitchen 0<-6, 0<-5) and KITTI (95<-94, 199<-198) pairs that exist
    under ``shared_data``, as file paths."""
    pairs = []
    demo = shared_data / "geotransformer_repo" / "demo"
    if demo.is_dir():
        gt = np.load(demo / "gt.npy").tolist()
        pairs.append(
            RealPair("3DMatch 0<-6", "indoor", str(demo / "src.npy"), str(demo / "ref.npy"), gt)
        )
    frags = shared_data / "regtr_3dmatch_fragments"
    if frags.is_dir():
        meta = json.loads((frags / "pairs.json").read_text())["pairs"][0]
        pairs.append(
            RealPair(
                f"3DMatch {meta['ref_frag']}<-{meta['src_frag']}", "indoor",
                str(frags / meta["src_file"]), str(frags / meta["ref_file"]),
                meta["T_ref_from_src_gtlog"],
            )
        )  # fmt: skip
    kitti = shared_data / "kitti00_scancontext"
    if kitti.is_dir():
        for p in json.loads((kitti / "pairs.json").read_text())["pairs"][:2]:
            name = f"KITTI {int(p['ref_file'][:6])}<-{int(p['src_file'][:6])}"
            pairs.append(
                RealPair(name, "outdoor", str(kitti / p["src_file"]),
                             str(kitti / p["ref_file"]), p["T_ref_from_src"])
            )  # fmt: skip
    return pairs
