"""The synthetic shapes generator and the COCO loader."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from pcreg.data.vision.coco import MEAN, STD, CocoDetection, collate_images
from pcreg.data.vision.shapes import draw_shape, generate_image, write_shapes_dataset
from pcreg.errors import CorruptFileError, MissingFileError


def test_shapes_fill_their_boxes_tightly():
    rng = np.random.default_rng(0)
    for kind in (1, 2, 3):
        box = np.array([10.0, 12.0, 30.0, 20.0])
        mask = draw_shape(64, 64, kind, box, rng)
        ys, xs = np.nonzero(mask)
        assert xs.min() >= 10 and xs.max() < 40 and ys.min() >= 12 and ys.max() < 32
        assert xs.max() - xs.min() >= 28 and ys.max() - ys.min() >= 18  # touches the box sides
        area = mask.sum() / (30 * 20)
        expected = {1: 1.0, 2: np.pi / 4, 3: 0.5}[kind]
        assert area == pytest.approx(expected, abs=0.06)


def test_generated_images_are_varied_and_annotated(tmp_path):
    rng = np.random.default_rng(1)
    sizes, counts = set(), []
    for _ in range(40):
        image, objects = generate_image(rng)
        sizes.add(image.shape[:2])
        counts.append(len(objects))
        for _cat, (x, y, w, h) in objects:
            assert min(x, y) >= 0 and x + w <= image.shape[1] and y + h <= image.shape[0]
    assert len(sizes) > 20 and min(counts) >= 1 and max(counts) <= 6 and max(counts) >= 4


def test_coco_round_trip_and_loader(tmp_path):
    ann = write_shapes_dataset(tmp_path, "val", 12, seed=3)
    coco = json.loads(ann.read_text())
    assert len(coco["images"]) == 12 and {c["name"] for c in coco["categories"]} == {
        "rectangle", "ellipse", "triangle"}  # fmt: skip
    ds = CocoDetection(tmp_path / "val", ann)
    image, target = ds[0]
    info = coco["images"][0]
    assert image.shape == (3, info["height"], info["width"])
    anns = [a for a in coco["annotations"] if a["image_id"] == info["id"]]
    x, y, w, h = anns[0]["bbox"]
    cx, cy, bw, bh = target["boxes"][0].tolist()
    assert [cx, cy, bw, bh] == pytest.approx(
        [(x + w / 2) / info["width"], (y + h / 2) / info["height"], w / info["width"],
         h / info["height"]]
    )  # fmt: skip
    assert target["labels"][0] == anns[0]["category_id"] - 1
    # the box contains the shape: pixels inside differ from the corners of the box surround
    png = np.asarray(Image.open(tmp_path / "val" / info["file_name"]))
    assert png.shape[:2] == (info["height"], info["width"])
    images, valid, targets = collate_images([ds[0], ds[1]])
    assert images.shape[0] == 2 and valid.shape == images[:, 0].shape
    for k in range(2):
        h_k, w_k = targets[k]["size"]
        assert valid[k].sum() == h_k * w_k and torch.all(images[k][:, valid[k] == 0] == 0)


def test_loader_errors(tmp_path):
    with pytest.raises(MissingFileError, match="COCO annotation file not found"):
        CocoDetection(tmp_path, tmp_path / "none.json")
    (tmp_path / "bad.json").write_text('{"images": 3}')
    with pytest.raises(CorruptFileError, match="not a COCO detection file"):
        CocoDetection(tmp_path, tmp_path / "bad.json")


def test_detection_pictures_undo_the_loader_normalisation(tmp_path):
    """viz takes the normalisation as values (it does not import data): its defaults are the
    loader's, so a picture of a loaded batch shows the original pixels."""
    from pcreg.viz.detections import IMAGENET_MEAN, IMAGENET_STD, save_detections_png

    assert torch.allclose(MEAN, torch.tensor(IMAGENET_MEAN))
    assert torch.allclose(STD, torch.tensor(IMAGENET_STD))
    ann = write_shapes_dataset(tmp_path, "val", 2, seed=3)
    ds = CocoDetection(tmp_path / "val", ann)
    images, valid, targets = collate_images([ds[0], ds[1]])
    q = 4
    outputs = {"pred_logits": torch.randn(2, q, 4), "pred_boxes": torch.rand(2, q, 4) * 0.5 + 0.2}
    png = save_detections_png(
        tmp_path / "p.png", images, valid, targets, outputs, names=["r", "e", "t"], threshold=0.0
    )
    assert Image.open(png).size[0] > 100
