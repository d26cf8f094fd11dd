"""Synthetic detection data: filled rectangles, ellipses and triangles on textured backgrounds,
written in COCO format (the format users' own data comes in).

Each image has a random size (``min_size``..``max_size`` px per side, so batches need padding),
a background of two random colours in a gradient plus noise, and 1-6 objects of random colour
and size (8-45 % of the shorter side) placed so that no two boxes overlap by more than
``max_iou``. A box is the tight extent of the drawn shape (occluded parts included). Splits are
independent streams of the same generator: ``seed`` picks the stream.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from pcreg._fs import atomic_output

__all__ = ["CATEGORIES", "draw_shape", "generate_image", "write_shapes_dataset"]

CATEGORIES = [
    {"id": 1, "name": "rectangle"},
    {"id": 2, "name": "ellipse"},
    {"id": 3, "name": "triangle"},
]


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    x0, y0 = max(a[0], b[0]), max(a[1], b[1])
    x1, y1 = min(a[0] + a[2], b[0] + b[2]), min(a[1] + a[3], b[1] + b[3])
    inter = max(0.0, x1 - x0) * max(0.0, y1 - y0)
    return inter / (a[2] * a[3] + b[2] * b[3] - inter)


def draw_shape(
    height: int, width: int, kind: int, box: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Boolean mask ``(H, W)`` of one shape filling the box ``(x, y, w, h)`` (pixels):
    the rectangle itself, the inscribed ellipse, or a triangle with one vertex on each of three
    box sides (so the box is tight)."""
    x, y, w, h = box
    yy, xx = np.mgrid[0:height, 0:width] + 0.5
    if kind == 1:
        return (xx >= x) & (xx < x + w) & (yy >= y) & (yy < y + h)
    if kind == 2:
        return ((xx - x - w / 2) / (w / 2)) ** 2 + ((yy - y - h / 2) / (h / 2)) ** 2 <= 1
    apex = x + rng.uniform(0, w)
    pts = np.array([[apex, y], [x, y + h], [x + w, y + h]])
    if rng.random() < 0.5:  # upside down
        pts[:, 1] = 2 * y + h - pts[:, 1]
    (ax, ay), (bx, by), (cx, cy) = pts
    det = (by - cy) * (ax - cx) + (cx - bx) * (ay - cy)
    l1 = ((by - cy) * (xx - cx) + (cx - bx) * (yy - cy)) / det
    l2 = ((cy - ay) * (xx - cx) + (ax - cx) * (yy - cy)) / det
    return (l1 >= 0) & (l2 >= 0) & (1 - l1 - l2 >= 0)


def generate_image(
    rng: np.random.Generator,
    min_size: int = 56,
    max_size: int = 80,
    max_objects: int = 6,
    max_iou: float = 0.3,
) -> tuple[np.ndarray, list[tuple[int, list[float]]]]:
    """One image ``(H, W, 3) uint8`` and its objects ``[(category_id, [x, y, w, h]), ...]``."""
    h, w = (int(v) for v in rng.integers(min_size, max_size + 1, size=2))
    c0, c1 = rng.uniform(0, 255, size=(2, 3))
    t = (
        np.linspace(0, 1, w)[None, :, None]
        if rng.random() < 0.5
        else np.linspace(0, 1, h)[:, None, None]
    )
    image = c0 * (1 - t) + c1 * t + rng.normal(0, 8, size=(h, w, 3))
    image = np.broadcast_to(image, (h, w, 3)).copy()
    objects: list[tuple[int, list[float]]] = []
    boxes: list[np.ndarray] = []
    for _ in range(int(rng.integers(1, max_objects + 1))):
        for _attempt in range(20):
            short = min(h, w)
            bw, bh = rng.uniform(0.08 * short, 0.45 * short, size=2)
            box = np.array([rng.uniform(0, w - bw), rng.uniform(0, h - bh), bw, bh])
            if all(_iou(box, other) <= max_iou for other in boxes):
                break
        else:
            continue
        kind = int(rng.integers(1, 4))
        mask = draw_shape(h, w, kind, box, rng)
        if mask.sum() < 12:
            continue
        colour = rng.uniform(0, 255, size=3)
        while np.abs(colour - image[mask].mean(0)).sum() < 120:  # visible against its backdrop
            colour = rng.uniform(0, 255, size=3)
        image[mask] = colour + rng.normal(0, 4, size=(int(mask.sum()), 3))
        ys, xs = np.nonzero(mask)
        tight = [
            float(xs.min()),
            float(ys.min()),
            float(xs.max() + 1 - xs.min()),
            float(ys.max() + 1 - ys.min()),
        ]
        boxes.append(np.array(tight))
        objects.append((kind, tight))
    return np.clip(image, 0, 255).astype(np.uint8), objects


def write_shapes_dataset(
    root: str | os.PathLike[str],
    split: str,
    num_images: int,
    seed: int,
    *,
    overwrite: bool = False,
    **kwargs: object,
) -> Path:
    """Write ``root/<split>/*.png`` and ``root/annotations/<split>.json`` (COCO detection).
    Returns the annotation path."""
    from PIL import Image

    root = Path(root)
    ann_path = root / "annotations" / f"{split}.json"
    (root / split).mkdir(parents=True, exist_ok=True)
    ann_path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    images, annotations = [], []
    for i in tqdm(range(num_images), desc=f"shapes {split}", unit="img"):
        image, objects = generate_image(rng, **kwargs)  # type: ignore[arg-type]
        name = f"{i:06d}.png"
        Image.fromarray(image).save(root / split / name)
        images.append(
            {"id": i + 1, "file_name": name, "height": image.shape[0], "width": image.shape[1]}
        )
        for kind, box in objects:
            annotations.append(
                {"id": len(annotations) + 1, "image_id": i + 1, "category_id": kind, "bbox": box,
                 "area": box[2] * box[3], "iscrowd": 0}
            )  # fmt: skip
    coco = {"images": images, "annotations": annotations, "categories": CATEGORIES}
    with atomic_output(ann_path, overwrite=overwrite) as tmp:
        tmp.write_text(json.dumps(coco))
    return ann_path
