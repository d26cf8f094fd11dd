"""Strict config loading and Hydra composition: misspelt keys fail fast, naming the key."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from pcreg._compose import compose
from pcreg.config import ConfigError, EvaluateConfig, OptimConfig, from_dict
from pcreg.engine.configs import DetrExperimentConfig, TrainConfig, ViTExperimentConfig


def test_composed_experiment_is_typed():
    cfg = from_dict(
        ViTExperimentConfig, compose("vit", ["experiment=vit_digits", "train.epochs=7"])
    )
    assert cfg.train.epochs == 7
    assert cfg.out_dir == "outputs/vit_digits"
    assert cfg.model.patch_size == 2 and isinstance(cfg.model.mlp_ratio, float)


def test_misspelt_override_fails_fast_and_names_the_key():
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"train\.epchs"):
        compose("vit", ["experiment=vit_digits", "train.epchs=3"])
    assert time.perf_counter() - start < 5


def test_strict_loader_names_unknown_nested_key_and_suggests():
    data = compose("vit", [])
    data["train"]["learning_rate"] = 0.1
    with pytest.raises(ConfigError) as err:
        from_dict(ViTExperimentConfig, data)
    assert str(err.value).startswith("train.learning_rate: unknown config key")
    data["train"].pop("learning_rate")
    data["model"]["embed_dm"] = 3
    with pytest.raises(ConfigError, match="did you mean 'embed_dim'"):
        from_dict(ViTExperimentConfig, data)


def test_strict_loader_checks_types():
    with pytest.raises(ConfigError, match=r"train\.epochs: expected int"):
        from_dict(ViTExperimentConfig, {"train": {"epochs": "many"}})
    with pytest.raises(ConfigError, match=r"train\.lr: expected float"):
        from_dict(ViTExperimentConfig, {"train": {"lr": True}})
    cfg = from_dict(ViTExperimentConfig, {"train": {"lr": 1}, "checkpoint": None})
    assert cfg.train.lr == 1.0 and isinstance(cfg.train.lr, float)


@pytest.mark.parametrize(
    ("name", "cls"),
    [("train", TrainConfig), ("detr", DetrExperimentConfig), ("evaluate", EvaluateConfig)],
)
def test_every_composed_config_loads_strictly(name, cls):
    cfg = from_dict(cls, compose(name, []))
    assert isinstance(cfg, cls)
    data = compose(name, [])
    data["out_dirr"] = "x"
    with pytest.raises(ConfigError, match="out_dirr: unknown config key"):
        from_dict(cls, data)


def test_nested_schemas_of_the_experiment_configs_are_typed():
    cfg = from_dict(
        TrainConfig,
        {"optim": {"lr": 1}, "model": {"voxel_size": 0.05}, "data": {"augmentation": {}}},
    )
    assert isinstance(cfg.optim, OptimConfig) and cfg.optim.lr == 1.0
    assert cfg.model.voxel_size == 0.05
    with pytest.raises(ConfigError, match=r"data\.augmentation\.rotaton: unknown config key"):
        from_dict(TrainConfig, {"data": {"augmentation": {"rotaton": 1.0}}})


def test_config_module_is_a_leaf():
    """``pcreg.config`` (floor 0) loads no other pcreg module but ``pcreg.errors``: importing it
    costs no torch and cannot pull a model in (docs/architecture.md, "Import layers")."""
    code = (
        "import sys, pcreg.config; "
        "print(sorted(m for m in sys.modules if m.startswith(('pcreg', 'torch'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['pcreg', 'pcreg.config', 'pcreg.errors']"


@pytest.mark.parametrize(
    ("command", "overrides", "said"),
    [
        ("vit", ["experiment=vit_digits", "train.epochs=0"], "epochs must be a whole number"),
        ("train", ["experiment=indoor", "train.epochs=-1"], "epochs must be a whole number"),
        ("train", ["experiment=indoor", "train.device=cuda:7"], "device: 'cuda:7'"),
    ],
)
def test_a_training_run_that_cannot_run_is_refused_before_any_work(
    tmp_path, monkeypatch, capsys, command, overrides, said
):
    """``train.epochs=0`` (an IndexError after the data was made) and a CUDA device on a CPU
    build (an AssertionError after 200 rooms were generated) are one line, exit 2, and leave
    nothing behind."""
    import torch

    from pcreg.cli import main

    if said.startswith("device") and torch.cuda.is_available() and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    monkeypatch.chdir(tmp_path)
    argv = [command, "train", *overrides] if command == "vit" else [command, *overrides]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err
    assert list(tmp_path.iterdir()) == []
