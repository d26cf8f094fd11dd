"""COCO-format detection data: images in a folder plus an annotation JSON (``images``,
``annotations`` with ``bbox = [x, y, w, h]`` in pixels, ``categories``).

Targets follow DETR: ``boxes (N, 4)`` as ``(cx, cy, w, h)`` normalised by the image size,
``labels (N,)`` contiguous indices ``0..K-1`` into the sorted category ids, plus ``image_id``
and ``size (H, W)``. :func:`collate_images` pads a batch to its largest image and returns the
``valid`` mask the model and the positional encoding need.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from pcreg.errors import CorruptFileError, MissingFileError

__all__ = ["CocoDetection", "collate_images"]

MEAN = torch.tensor([0.485, 0.456, 0.406])
STD = torch.tensor([0.229, 0.224, 0.225])


class CocoDetection:
    """``dataset[i] -> (image (3, H, W) float32 normalised, target dict)``."""

    def __init__(self, image_dir: str | os.PathLike[str], ann_file: str | os.PathLike[str]) -> None:
        self.image_dir = Path(image_dir)
        ann_file = Path(ann_file)
        if not ann_file.is_file():
            raise MissingFileError(ann_file, "COCO annotation file not found")
        try:
            coco = json.loads(ann_file.read_text())
            self.images = sorted(coco["images"], key=lambda im: im["id"])
            self.categories = sorted(c["id"] for c in coco["categories"])
            anns = coco["annotations"]
        except (ValueError, KeyError, TypeError) as err:
            raise CorruptFileError(ann_file, f"not a COCO detection file ({err})") from None
        self.ann_file = ann_file
        self.label_of = {cid: i for i, cid in enumerate(self.categories)}
        self.by_image: dict[int, list[dict]] = {im["id"]: [] for im in self.images}
        for a in anns:
            if not a.get("iscrowd", 0):
                self.by_image[a["image_id"]].append(a)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[Tensor, dict]:
        from PIL import Image

        info = self.images[i]
        path = self.image_dir / info["file_name"]
        if not path.is_file():
            raise MissingFileError(path, "image listed in the annotations not found")
        rgb = np.asarray(Image.open(path).convert("RGB"), dtype=np.float32) / 255.0
        image = (torch.from_numpy(rgb) - MEAN) / STD
        h, w = rgb.shape[:2]
        anns = self.by_image[info["id"]]
        xywh = torch.tensor([a["bbox"] for a in anns], dtype=torch.float32).reshape(-1, 4)
        boxes = torch.stack(
            [(xywh[:, 0] + xywh[:, 2] / 2) / w, (xywh[:, 1] + xywh[:, 3] / 2) / h,
             xywh[:, 2] / w, xywh[:, 3] / h], dim=1
        )  # fmt: skip
        labels = torch.tensor([self.label_of[a["category_id"]] for a in anns], dtype=torch.int64)
        target = {"boxes": boxes, "labels": labels, "image_id": info["id"], "size": (h, w)}
        return image.permute(2, 0, 1).contiguous(), target


def collate_images(items: list[tuple[Tensor, dict]]) -> tuple[Tensor, Tensor, list[dict]]:
    """Pad to the largest height / width (bottom-right): ``(images (B, 3, H, W), valid (B, H, W)
    bool, targets)``."""
    h = max(im.shape[1] for im, _ in items)
    w = max(im.shape[2] for im, _ in items)
    images = torch.zeros(len(items), 3, h, w)
    valid = torch.zeros(len(items), h, w, dtype=torch.bool)
    for k, (im, _) in enumerate(items):
        images[k, :, : im.shape[1], : im.shape[2]] = im
        valid[k, : im.shape[1], : im.shape[2]] = True
    return images, valid, [t for _, t in items]
