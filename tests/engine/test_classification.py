"""`pcreg vit train|evaluate` end to end on the real digits (short runs; the full recipe is a
slow test)."""

from __future__ import annotations

import json

import pytest

from pcreg.cli import main
from pcreg.engine.checkpoint import load_checkpoint, save_checkpoint
from pcreg.engine.classification import warmup_cosine
from pcreg.errors import CorruptFileError, MissingFileError


def test_short_training_learns_and_evaluate_reproduces_it(tmp_path, capsys):
    """A one-layer ViT, 8 epochs: 0.77 test accuracy (chance 0.1) in 15 s as a whole process
    on 2 cores, where the preset's four layers needed 12 epochs and 25 s for 0.82; the four
    layers are trained (one epoch) by the rollout test below."""
    out = tmp_path / "run"
    args = [
        "vit",
        "train",
        "experiment=vit_digits",
        f"out_dir={out}",
        "model.depth=1",
        "train.epochs=8",
        "train.warmup_epochs=2",
        "rollout_images=6",
    ]
    assert main(args) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["test_accuracy"] > 0.6  # chance is 0.1
    assert metrics["history"]["train_loss"][-1] < metrics["history"]["train_loss"][0]
    for name in ("checkpoint.pt", "training_curves.png", "attention_rollout.png"):
        assert (out / name).stat().st_size > 1000
    capsys.readouterr()
    assert main(["vit", "evaluate", f"out_dir={out}"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["test_accuracy"] == pytest.approx(metrics["test_accuracy"], abs=1e-6)
    # a second run into the same directory refuses to overwrite
    assert main(args) == 2
    assert "already exists" in capsys.readouterr().err


def test_bad_config_exits_2_naming_the_key(capsys):
    assert main(["vit", "train", "experiment=vit_digits", "train.epchs=3"]) == 2
    assert "train.epchs" in capsys.readouterr().err


def test_checkpoint_errors_name_the_file(tmp_path):
    with pytest.raises(MissingFileError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "nope.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a zip")
    with pytest.raises(CorruptFileError, match=str(bad)):
        load_checkpoint(bad)
    good = save_checkpoint(tmp_path / "ok.pt", "vit", {}, step=3)
    assert load_checkpoint(good)["step"] == 3
    with pytest.raises(CorruptFileError, match="expected 'detr'"):
        load_checkpoint(good, kind="detr")


def test_warmup_cosine_schedule():
    assert warmup_cosine(0, 100, 10) == pytest.approx(0.1)
    assert warmup_cosine(9, 100, 10) == pytest.approx(1.0)
    assert warmup_cosine(55, 100, 10) == pytest.approx(0.5)
    assert warmup_cosine(100, 100, 10) == pytest.approx(0.0)


@pytest.mark.slow
def test_vit_digits_recipe_reaches_97_percent(tmp_path):
    out = tmp_path / "full"
    assert main(["vit", "train", "experiment=vit_digits", f"out_dir={out}"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["test_accuracy"] >= 0.97
    assert metrics["train_time_s"] <= 600


def test_train_vit_returns_the_rollout_to_draw_and_draws_nothing(tmp_path):
    """The trainer writes data only; ``pcreg vit train`` draws the two PNGs from its result."""
    import numpy as np
    import torch

    from pcreg._compose import compose
    from pcreg.config import from_dict
    from pcreg.data.vision.digits import load_digits_split
    from pcreg.engine.classification import rollout_sample, train_vit
    from pcreg.engine.configs import ViTExperimentConfig
    from pcreg.models.vit import VisionTransformer

    overrides = ["experiment=vit_digits", f"out_dir={tmp_path}", "train.epochs=1",
                 "train.warmup_epochs=1", "rollout_images=5"]  # fmt: skip
    cfg = from_dict(ViTExperimentConfig, compose("vit", overrides))
    run = train_vit(cfg)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt", "metrics.json"]
    assert run.metrics == json.loads((tmp_path / "metrics.json").read_text())
    assert run.metrics["history"]["epoch"] == [1]
    split = load_digits_split(cfg.data.seed, cfg.data.test_fraction)
    r = run.rollout
    assert r.labels == split.test_labels[:5].tolist()
    np.testing.assert_array_equal(r.images, split.test_images[:5, 0].numpy())
    # the rollout and predictions are those of the saved model
    model = VisionTransformer(cfg.model)
    model.load_state_dict(load_checkpoint(tmp_path / "checkpoint.pt", kind="vit")["model"])
    again = rollout_sample(model, split.test_images[:5], split.test_labels[:5])
    g = model.grid
    assert r.relevance.shape == (5, g, g) and (r.relevance >= 0).all()
    np.testing.assert_allclose(r.relevance, again.relevance, rtol=1e-6, atol=1e-9)
    with torch.no_grad():
        assert r.predictions == model(split.test_images[:5]).argmax(1).tolist()
