"""A trained DETR on image files: ``pcreg detr predict IMAGE... --render out.png``.

The checkpoint carries its experiment configuration (:func:`pcreg.engine.detection.train_detr`
writes it), so the model is rebuilt from the file alone; the category names come from the
checkpoint, or, for the generated shapes, from :data:`pcreg.data.vision.shapes.CATEGORIES`.
Images are read as RGB, normalised like the training data and run in padded batches (the
detections of an image do not depend on its batch: the backbone masks the padding).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from pcreg.engine.detection import SHIPPED_DETR, predictions_to_coco
from pcreg.errors import CorruptFileError, MissingFileError

__all__ = ["MAX_PIXELS", "SHIPPED_DETR", "Detection", "Detector", "load_detector"]

#: larger images are refused: a 4096 x 4096 image already takes ~3 GB through the backbone
MAX_PIXELS = 4096 * 4096


@dataclasses.dataclass(frozen=True)
class Detection:
    """One detected object: ``label`` (category name), ``category_id`` (COCO id), ``score``
    in (0, 1], and ``bbox`` ``[x, y, w, h]`` in pixels of the image (COCO's convention)."""

    label: str
    category_id: int
    score: float
    bbox: tuple[float, float, float, float]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class Detector:
    """A DETR ready to run on images; call it with image paths (any format PIL reads).

    Args:
        model: the DETR, in eval mode.
        categories: ``[(category_id, name), ...]`` in label order.
        batch_size: images per padded batch.
    """

    def __init__(self, model, categories: Sequence[tuple[int, str]], batch_size: int = 8) -> None:
        self.model = model.eval()
        self.categories = list(categories)
        self.batch_size = batch_size

    @staticmethod
    def read(path: str | os.PathLike[str]) -> np.ndarray:
        """``(H, W, 3) float32`` RGB in [0, 1].

        Raises:
            MissingFileError / CorruptFileError: no such file / not an image PIL can read.
        """
        from PIL import Image, UnidentifiedImageError

        path = Path(path)
        if not path.is_file():
            raise MissingFileError(path, "image not found")
        try:
            with Image.open(path) as im:
                if im.width * im.height > MAX_PIXELS:  # read from the header, before decoding
                    raise CorruptFileError(
                        path, f"image too large ({im.width} x {im.height} px; at most "
                        f"{MAX_PIXELS:,} pixels: the model works on images of about 80 px)",
                    )  # fmt: skip
                rgb = np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0
        except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as err:
            raise CorruptFileError(path, f"cannot read the image ({err})") from None
        if rgb.shape[0] < 8 or rgb.shape[1] < 8:
            raise CorruptFileError(path, f"image too small ({rgb.shape[1]} x {rgb.shape[0]} px)")
        return rgb

    @torch.no_grad()
    def __call__(
        self, images: Sequence[np.ndarray], threshold: float = 0.5
    ) -> list[list[Detection]]:
        """Detections scoring at least ``threshold`` per image (``(H, W, 3)`` RGB in [0, 1]),
        best first."""
        from pcreg.data.vision.coco import MEAN, STD, collate_images

        names = dict(self.categories)
        ids = [c for c, _ in self.categories]
        out: list[list[Detection]] = []
        for first in range(0, len(images), self.batch_size):
            chunk = images[first : first + self.batch_size]
            items = [
                (
                    ((torch.from_numpy(np.ascontiguousarray(rgb)) - MEAN) / STD).permute(2, 0, 1),
                    {"image_id": k, "size": rgb.shape[:2]},
                )
                for k, rgb in enumerate(chunk)
            ]
            batch, valid, targets = collate_images(items)
            device = next(self.model.parameters()).device  # where the caller put the model
            raw = self.model(batch.to(device), valid.to(device))
            entries = predictions_to_coco(raw, targets, ids)
            for k in range(len(chunk)):
                mine = [e for e in entries if e["image_id"] == k and e["score"] >= threshold]
                mine.sort(key=lambda e: -e["score"])
                out.append([_detection(e, names) for e in mine])
        return out


def _detection(entry: dict, names: dict[int, str]) -> Detection:
    category = entry["category_id"]
    return Detection(names[category], category, entry["score"], tuple(entry["bbox"]))


def load_detector(checkpoint: str | os.PathLike[str] | None = None) -> Detector:
    """The DETR of ``checkpoint`` (default :data:`SHIPPED_DETR`).

    Raises:
        MissingFileError / CorruptFileError: no such checkpoint / not a DETR checkpoint.
    """
    from pcreg.config import from_dict
    from pcreg.engine.checkpoint import load_checkpoint
    from pcreg.engine.configs import DetrExperimentConfig
    from pcreg.models.detr import build_detr

    path = Path(checkpoint) if checkpoint is not None else SHIPPED_DETR
    ckpt = load_checkpoint(path, kind="detr")
    cfg = from_dict(DetrExperimentConfig, ckpt["config"])
    model = build_detr(cfg.model)
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as err:
        raise CorruptFileError(path, f"weights do not fit its configuration ({err})") from None
    categories = ckpt.get("categories")
    if not categories:
        from pcreg.data.vision.shapes import CATEGORIES

        if cfg.data.generate is None or len(CATEGORIES) != cfg.model.num_classes:
            categories = [(k + 1, f"class {k + 1}") for k in range(cfg.model.num_classes)]
        else:
            categories = [(c["id"], c["name"]) for c in CATEGORIES]
    return Detector(model, [tuple(c) for c in categories], cfg.train.batch_size)
