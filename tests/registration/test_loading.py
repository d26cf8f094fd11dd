"""Shipped-weights plumbing: export to float16, load by name or path, clear errors."""

from __future__ import annotations

import pytest
import torch

from pcreg.engine.checkpoint import load_checkpoint, save_checkpoint
from pcreg.errors import InputError, MissingFileError
from pcreg.registration.loading import (
    SHIPPED_MODELS,
    WEIGHTS_DIR,
    export_weights,
    load_network,
    weights_path,
)
from pcreg.registration.search import SearchConfig


def test_export_is_half_precision_and_loads_back(tmp_path, tiny_checkpoint):
    out = export_weights(tiny_checkpoint, tmp_path / "w.pt", step=123)
    ckpt = load_checkpoint(out, kind="geotransformer")
    assert ckpt["step"] == 123
    src = load_checkpoint(tiny_checkpoint)["model"]
    for k, v in ckpt["model"].items():
        if v.is_floating_point():
            assert v.dtype == torch.float16
            ref = src[k].float()
            # float16 rounding: relative error <= 2^-11 for normal numbers
            assert ((v.float() - ref).abs() <= ref.abs() * 2**-11 + 6.2e-5).all(), k
    registrar = load_network(out).network
    assert registrar.config.voxel_size == pytest.approx(0.05)
    assert next(registrar.model.parameters()).dtype == torch.float32
    assert not (tmp_path / "w.pt").with_suffix(".tmp").exists()
    with pytest.raises(InputError, match="already exists"):
        export_weights(tiny_checkpoint, out)


def test_training_checkpoints_load_and_export(tmp_path, tiny_checkpoint):
    base = load_checkpoint(tiny_checkpoint)
    train_ckpt = tmp_path / "last.pt"
    save_checkpoint(
        train_ckpt, "geotransformer-train", base["model"], config={"model": {}, "train": {}},
        model_config=base["config"], step=7,
    )  # fmt: skip
    assert load_network(train_ckpt).network.config == load_network(tiny_checkpoint).network.config
    out = export_weights(train_ckpt, tmp_path / "exported.pt")
    assert load_checkpoint(out)["config"] == base["config"]
    assert load_checkpoint(out)["step"] == 7  # provenance kept for the model card


def test_names_and_errors(tmp_path):
    assert set(SHIPPED_MODELS) == {"indoor", "outdoor"}
    for name in SHIPPED_MODELS:
        if (WEIGHTS_DIR / f"{name}.pt").is_file():
            assert weights_path(name) == WEIGHTS_DIR / f"{name}.pt"
        else:
            with pytest.raises(InputError, match="not in this build"):
                weights_path(name)
    with pytest.raises(InputError, match="unknown model"):
        weights_path("indor")
    with pytest.raises(MissingFileError, match="model checkpoint not found"):
        weights_path(tmp_path / "none.pt")
    vit = tmp_path / "vit.pt"
    save_checkpoint(vit, "vit", {"w": torch.zeros(1)}, config={})
    with pytest.raises(InputError, match="not a registration model"):
        load_network(vit)


def test_inference_settings_travel_with_the_weights(tmp_path, tiny_checkpoint):
    """A checkpoint's ``inference`` entry (or, in files written before the split, the search
    keys among its configuration) gives the network's default search; none: the plain one."""
    assert load_network(tiny_checkpoint).search == SearchConfig()
    out = export_weights(
        tiny_checkpoint, tmp_path / "m.pt", inference={"orientation_search": "manhattan"}
    )
    assert load_network(out).search == SearchConfig(orientation_search="manhattan")
    base = load_checkpoint(tiny_checkpoint)
    legacy = tmp_path / "legacy.pt"
    config = {**base["config"], "orientation_search": "manhattan", "orientation_keep": 0.5}
    save_checkpoint(legacy, "geotransformer", base["model"], config=config)
    loaded = load_network(legacy)
    assert loaded.search == SearchConfig("manhattan", orientation_keep=0.5)
    assert loaded.network.config == load_network(tiny_checkpoint).network.config
    # the shipped files: the indoor network searches Manhattan frames, the outdoor one does not
    if (WEIGHTS_DIR / "indoor.pt").is_file():
        assert load_network("indoor").search.orientation_search == "manhattan"
        assert load_network("indoor").setting == "indoor"
    if (WEIGHTS_DIR / "outdoor.pt").is_file():
        assert load_network("outdoor").search.orientation_search == "none"


def test_unusable_checkpoints_are_input_errors(tmp_path):
    from pcreg.engine.checkpoint import load_checkpoint, save_checkpoint
    from pcreg.errors import CorruptFileError
    from pcreg.registration.loading import WEIGHTS_DIR, load_network

    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    with pytest.raises(CorruptFileError, match=r"empty\.pt: cannot read checkpoint"):
        load_network(empty)
    ckpt = load_checkpoint(WEIGHTS_DIR / "indoor.pt")
    for voxel in (-1.0, float("nan"), 0.0):
        bad = tmp_path / f"voxel{voxel}.pt"
        save_checkpoint(bad, "geotransformer", ckpt["model"],
                        config={**ckpt["config"], "voxel_size": voxel})  # fmt: skip
        with pytest.raises(CorruptFileError, match="unusable model configuration"):
            load_network(bad)
