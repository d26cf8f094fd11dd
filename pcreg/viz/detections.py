"""Detections next to the ground truth, drawn on the images (``predictions.png``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from pcreg._fs import atomic_output

__all__ = ["save_detections_png"]

_COLORS = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4"]
#: the ImageNet channel statistics the images are normalised with (those of
#: ``pcreg.data.vision.coco.MEAN`` / ``STD``; viz takes values, it does not import data)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def save_detections_png(
    path: str | os.PathLike[str],
    images: Tensor,
    valid: Tensor,
    targets: list[dict],
    outputs: dict,
    *,
    names: list[str],
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
    threshold: float = 0.5,
    max_images: int = 8,
    overwrite: bool = False,
) -> Path:
    """Two rows: ground-truth boxes (top) and predictions scoring above ``threshold``
    (bottom, with class and score) for up to ``max_images`` images of one batch
    (``images (B, 3, H, W)``, normalised per channel as ``(rgb - mean) / std``; ``valid``
    is not read, the true size comes from ``targets[i]["size"]``). ``targets``: per image
    ``size (h, w)``, normalised ``boxes (K, 4)`` (cx, cy, w, h) and ``labels (K,)``;
    ``outputs``: ``pred_logits (B, Q, C + 1)`` and ``pred_boxes (B, Q, 4)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import patheffects
    from matplotlib.patches import Rectangle

    mean_t = torch.as_tensor(mean, dtype=images.dtype)
    std_t = torch.as_tensor(std, dtype=images.dtype)
    n = min(max_images, len(targets))
    fig, axes = plt.subplots(2, n, figsize=(2.2 * n, 4.8), squeeze=False)
    prob = outputs["pred_logits"].softmax(-1)[..., :-1]
    scores, labels = prob.max(-1)
    for i in range(n):
        h, w = targets[i]["size"]
        rgb = (images[i].permute(1, 2, 0) * std_t + mean_t).clamp(0, 1)[:h, :w].numpy()
        rows = [
            ("truth", targets[i]["boxes"], targets[i]["labels"], None),
            ("detr", outputs["pred_boxes"][i], labels[i], scores[i]),
        ]
        for r, (kind, boxes, labs, sc) in enumerate(rows):
            ax = axes[r, i]
            ax.imshow(rgb)
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_ylabel(kind)
            for k in range(len(boxes)):
                if sc is not None and float(sc[k]) < threshold:
                    continue
                cx, cy, bw, bh = (float(v) for v in boxes[k])
                color = _COLORS[int(labs[k]) % len(_COLORS)]
                rect = Rectangle(((cx - bw / 2) * w - 0.5, (cy - bh / 2) * h - 0.5), bw * w,
                                 bh * h, fill=False, ec=color, lw=1.5)  # fmt: skip
                rect.set_path_effects([patheffects.withStroke(linewidth=3, foreground="white")])
                ax.add_patch(rect)
                text = names[int(labs[k])][:4] + ("" if sc is None else f" {float(sc[k]):.2f}")
                ax.text((cx - bw / 2) * w, (cy - bh / 2) * h - 1, text, color=color, fontsize=6)
    fig.suptitle(f"ground truth (top) and DETR detections with score >= {threshold} (bottom)")
    fig.tight_layout()
    with atomic_output(path, overwrite=overwrite) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return Path(path)
