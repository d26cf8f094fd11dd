"""Draw docs/architecture.png: the registration pipeline and its network (docs/architecture.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

BOXES = [
    # (x, y, w, h, title, detail, colour): pcreg.registration.Registration, (src, ref) throughout
    (0.2, 4.6, 2.6, 1.1, "src, ref",
     "paths, arrays, tensors, Open3D\n(N,3) / (M,3) metres (api.as_points)", "#e8e8e8"),
    (3.4, 4.6, 2.9, 1.1, "1. plan",
     "setting by extent or model, 10x scale\ncheck, points left at the voxel", "#e8e8e8"),
    (6.9, 4.6, 2.9, 1.1, "2. orientation search",
     "hypothesis sources: identity, Manhattan\n(24 cube rotations, FFT-ranked)", "#f3e1f7"),
    (6.9, 2.8, 2.9, 1.2, "network per hypothesis",
     "neighbor pyramid once; reference encoded\nonce; KPConv FPN + geometric transformer",
     "#cfe3f7"),
    (3.4, 2.8, 2.9, 1.2, "matcher",
     "superpoint matching, optimal transport\n(Sinkhorn + dustbin), mutual top-k", "#fde2c4"),
    (0.2, 2.8, 2.6, 1.2, "estimator",
     "local-to-global registration:\nweighted Procrustes per patch", "#fde2c4"),
    (0.2, 0.8, 2.6, 1.2, "best-supported\nhypothesis",
     "confidence-weighted inliers\nwithin the acceptance radius", "#d7f0d2"),
    (3.4, 0.8, 2.9, 1.2, "3. refine (optional)",
     "point-to-plane ICP (Open3D)\nor FPFH + RANSAC instead of 2.", "#d7f0d2"),
    (6.9, 0.8, 2.9, 1.2, "4. RegistrationResult",
     "T_ref_src (4x4), correspondences,\nconfidence, hypothesis, timings", "#e8e8e8"),
]  # fmt: skip
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
    ax.text(
        5.0,
        6.05,
        "pcreg.registration.Registration: one pipeline, (src, ref) throughout",
        ha="center",
        fontsize=13,
    )
    ax.text(
        5.0, 0.25,
        "purple: orientation search   blue / orange: GeoTransformer (models/geotransformer)   "
        "green: estimate and refinement",
        ha="center", fontsize=8.5, color="#555555",
    )  # fmt: skip
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 6.3)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
