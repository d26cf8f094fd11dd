"""``pcreg detr predict``: a trained DETR on image files gives the same detections as the
evaluation path, alone or in a batch, with category names from its checkpoint."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pcreg.cli import main


@pytest.fixture(scope="module")
def tiny_detr(overfit_detr):
    """The tiny DETR of ``tests/engine/conftest.py``: its checkpoint, the image directory and
    the folder holding the training detections (``train_detections.json``)."""
    root = overfit_detr[3]
    return root / "run" / "checkpoint.pt", root / "data" / "train", root


def test_predict_matches_the_evaluation_detections(tiny_detr, capsys):
    ckpt, images, root = tiny_detr
    coco = json.loads((root / "data/annotations/train.json").read_text())
    files = {im["id"]: images / im["file_name"] for im in coco["images"]}
    evaluated = json.loads((root / "train_detections.json").read_text())
    assert main(["detr", "predict", *map(str, files.values()), "--checkpoint", str(ckpt),
                 "--threshold", "0", "--json"]) == 0  # fmt: skip
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["image"] for r in rows] == [str(p) for p in files.values()]
    names = {c["id"]: c["name"] for c in coco["categories"]}
    for (image_id, _), row in zip(files.items(), rows, strict=True):
        want = sorted(
            (e for e in evaluated if e["image_id"] == image_id), key=lambda e: -e["score"]
        )
        got = row["detections"]
        assert len(got) == len(want) > 0  # threshold 0: every query
        for g, w in zip(got, want, strict=True):
            assert g["category_id"] == w["category_id"] and g["label"] == names[w["category_id"]]
            assert g["score"] == pytest.approx(w["score"], abs=1e-5)
            assert np.allclose(g["bbox"], w["bbox"], atol=1e-3)


def test_predict_one_image_alone_equals_it_in_a_batch(tiny_detr):
    from pcreg.engine.detection_predict import Detector, load_detector

    ckpt, images, _ = tiny_detr
    paths = sorted(images.glob("*.png"))[:5]
    rgb = [Detector.read(p) for p in paths]
    assert len({im.shape for im in rgb}) > 1  # sizes differ: the batch is padded
    detector = load_detector(ckpt)
    batch = detector(rgb, threshold=0.0)
    for i, im in enumerate(rgb):
        alone = detector([im], threshold=0.0)[0]
        assert [d.category_id for d in alone] == [d.category_id for d in batch[i]]
        assert np.allclose([d.score for d in alone], [d.score for d in batch[i]], atol=1e-5)
        assert np.allclose([d.bbox for d in alone], [d.bbox for d in batch[i]], atol=1e-3)


def test_predict_renders_and_refuses_bad_input(tiny_detr, tmp_path, capsys):
    ckpt, images, _ = tiny_detr
    image = sorted(images.glob("*.png"))[0]
    out = tmp_path / "dets.png"
    args = ["detr", "predict", str(image), "--checkpoint", str(ckpt), "--render", str(out)]
    assert main(args) == 0
    assert out.stat().st_size > 5000
    assert f"{image}: " in capsys.readouterr().out
    assert main(args) == 2  # exists: not replaced without --force
    assert "already exists" in capsys.readouterr().err
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    assert main(["detr", "predict", str(bad), "--checkpoint", str(ckpt)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and len(err.strip().splitlines()) == 1
    assert main(["detr", "predict", str(image), "--checkpoint", str(tmp_path / "none.pt")]) == 2
    assert "checkpoint not found" in capsys.readouterr().err
    # an image (or the checkpoint) is never the picture, even with --force; with --json the
    # error is an object on stdout (it was empty: the options are detr predict's own)
    copy = tmp_path / "copy.png"
    copy.write_bytes(image.read_bytes())
    for victim in (copy, ckpt):
        argv = ["detr", "predict", str(copy), "--checkpoint", str(ckpt), "--render", str(victim)]
        before = victim.read_bytes()
        assert main([*argv, "--force", "--json"]) == 2
        out_err = capsys.readouterr()
        assert "is an input of this command" in out_err.err
        assert json.loads(out_err.out)["exit_code"] == 2
        assert victim.read_bytes() == before
    from PIL import Image

    huge = tmp_path / "huge.png"
    Image.new("1", (5000, 4000)).save(huge)  # 20 M pixels: refused from its header
    assert main(["detr", "predict", str(huge), "--checkpoint", str(ckpt)]) == 2
    err = capsys.readouterr().err
    assert "image too large (5000 x 4000 px" in err and len(err.strip().splitlines()) == 1


def test_training_can_start_from_a_checkpoint(tiny_detr, tmp_path):
    import torch

    from pcreg._compose import compose
    from pcreg.config import ConfigError, from_dict
    from pcreg.engine.configs import DetrExperimentConfig
    from pcreg.engine.detection import train_detr

    ckpt, _, root = tiny_detr
    args = [
        "train.device=cpu",  # exact comparisons: the CPU's arithmetic, on any machine
        f"data.root={root / 'data'}", "data.val_split=train", f"out_dir={tmp_path / 'run'}",
        "model.d_model=32", "model.ffn_dim=64", "model.backbone_widths=[8,16,32]",
        "train.batch_size=8", "train.epochs=0", f"init={ckpt}",
    ]  # fmt: skip
    train_detr(from_dict(DetrExperimentConfig, compose("detr", args)))
    before = torch.load(ckpt, weights_only=True)["model"]
    after = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)["model"]
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)  # no step: the same weights
    wrong = [a for a in args if not a.startswith(("model.d_model", "out_dir"))]
    with pytest.raises(ConfigError, match="do not fit"):
        train_detr(
            from_dict(DetrExperimentConfig, compose("detr", [*wrong, f"out_dir={tmp_path / 'w'}"]))
        )
