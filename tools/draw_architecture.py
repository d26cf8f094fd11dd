"""Draw docs/architecture.png: the data flow of pcreg's registration network (DESIGN §1)."""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

BOXES = [
    # (x, y, w, h, title, detail, colour)
    (
        0.2,
        4.6,
        2.6,
        1.1,
        "source + reference",
        "(N,3) / (M,3) metres\npacked batch, lengths (B,)",
        "#e8e8e8",
    ),
    (
        3.4,
        4.6,
        2.9,
        1.1,
        "neighbor pyramid",
        "grid subsampling x2 per stage\nradius search (Open3D / KeOps)",
        "#e8e8e8",
    ),
    (
        6.9,
        4.6,
        2.9,
        1.1,
        "KPConv FPN backbone",
        "4 stages (3DMatch) / 5 (KITTI)\nshipped models: local frames (rotation inv.)",
        "#cfe3f7",
    ),
    (
        6.9,
        2.8,
        2.9,
        1.2,
        "geometric transformer",
        "self (distance + angle embedding)\n/ cross attention x3 (pcreg.layers)",
        "#cfe3f7",
    ),
    (
        3.4,
        2.8,
        2.9,
        1.2,
        "superpoint matching",
        "dual-normalised feature similarity\ntop-k superpoint pairs",
        "#fde2c4",
    ),
    (
        0.2,
        2.8,
        2.6,
        1.2,
        "optimal-transport\npoint matching",
        "Sinkhorn with dustbin per patch\nmutual top-k correspondences",
        "#fde2c4",
    ),
    (
        0.2,
        0.8,
        2.6,
        1.2,
        "local-to-global\nregistration",
        "weighted Procrustes per patch\nbest hypothesis + refinement",
        "#d7f0d2",
    ),
    (
        3.4,
        0.8,
        2.9,
        1.2,
        "T_ref_src (4x4)",
        "+ correspondences, scores\noptional point-to-plane ICP",
        "#d7f0d2",
    ),
    (
        6.9,
        0.8,
        2.9,
        1.2,
        "outputs",
        "T.txt, --json, alignment PNG,\nodometry poses, benchmarks",
        "#e8e8e8",
    ),
]
ARROWS = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 8)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs/architecture.png"))
    args = parser.parse_args()
    fig, ax = plt.subplots(figsize=(10.5, 6.2))
    centers = []
    for x, y, w, h, title, detail, colour in BOXES:
        ax.add_patch(
            FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.05", fc=colour, ec="#444444")
        )
        ax.text(x + w / 2, y + h - 0.28, title, ha="center", va="top", fontsize=10.5, weight="bold")
        ax.text(x + w / 2, y + 0.12, detail, ha="center", va="bottom", fontsize=8.3)
        centers.append((x, y, w, h))
    for a, b in ARROWS:
        xa, ya, wa, ha = centers[a]
        xb, yb, wb, hb = centers[b]
        if abs(ya - yb) < 1e-6:  # same row
            left_to_right = xb > xa
            start = (xa + wa + 0.05, ya + ha / 2) if left_to_right else (xa - 0.05, ya + ha / 2)
            end = (xb - 0.05, yb + hb / 2) if left_to_right else (xb + wb + 0.05, yb + hb / 2)
        else:  # down one row
            start, end = (xa + wa / 2, ya - 0.05), (xb + wb / 2, yb + hb + 0.05)
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, lw=1.4))
    ax.text(5.0, 6.05, "pcreg: GeoTransformer-style registration", ha="center", fontsize=13)
    ax.text(
        5.0, 0.25,
        "coarse: superpoints (last backbone stage)    fine: points of stage 2 grouped into patches",
        ha="center", fontsize=8.5, color="#555555",
    )  # fmt: skip
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 6.3)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
