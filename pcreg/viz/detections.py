"""Detections next to the ground truth, drawn on the images (``predictions.png``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from pcreg.viz.figures import save_figure

__all__ = ["save_detections_png", "save_image_detections_png"]

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
    return save_figure(fig, path, dpi=110, overwrite=overwrite)


def save_image_detections_png(
    path: str | os.PathLike[str],
    images: Sequence,
    detections: Sequence[Sequence],
    *,
    titles: Sequence[str] | None = None,
    threshold: float = 0.5,
    overwrite: bool = False,
) -> Path:
    """Each image (``(H, W, 3)`` RGB in [0, 1]) with its detections (objects with ``label``,
    ``score`` and ``bbox`` ``[x, y, w, h]`` in pixels, e.g.
    :class:`pcreg.engine.detection_predict.Detection`) as boxes, one colour per category, and a
    legend of the categories drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import patheffects
    from matplotlib.patches import Patch, Rectangle

    n = len(images)
    cols = min(n, 4)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.4 * rows + 0.6), squeeze=False)
    colors: dict[str, str] = {}
    for ax in axes.ravel():
        ax.axis("off")
    for i, (rgb, dets) in enumerate(zip(images, detections, strict=True)):
        ax = axes[i // cols, i % cols]
        ax.imshow(rgb)
        ax.set_title((titles[i] if titles else f"image {i}") + f": {len(dets)} found", fontsize=8)
        for d in dets:
            color = colors.setdefault(d.label, _COLORS[len(colors) % len(_COLORS)])
            x, y, w, h = d.bbox
            rect = Rectangle((x - 0.5, y - 0.5), w, h, fill=False, ec=color, lw=1.5)
            rect.set_path_effects([patheffects.withStroke(linewidth=3, foreground="white")])
            ax.add_patch(rect)
            ax.text(x, y - 1, f"{d.label} {d.score:.2f}", color=color, fontsize=7)
    handles = [Patch(facecolor=c, edgecolor="0.3", label=name) for name, c in colors.items()]
    if handles:
        fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8)
    fig.suptitle(f"DETR detections with score >= {threshold}", fontsize=10)
    fig.tight_layout(rect=(0, 0.06 if handles else 0, 1, 1))
    return save_figure(fig, path, dpi=110, overwrite=overwrite)
