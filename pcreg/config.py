"""Typed configuration schemas and a strict loader.

Hydra composes YAML into a plain mapping; :func:`from_dict` turns it into a dataclass tree and
fails on the first key it does not know, naming its dotted path and the closest known key,
before anything expensive runs.

This module is a leaf (floor 0 of docs/architecture.md, "Import layers"): it imports nothing of
pcreg but :mod:`pcreg.errors`. It holds the loader and the schemas made of plain fields. The
experiment configs that embed a model's, the augmentation's or the loss's own config
(:class:`~pcreg.engine.configs.TrainConfig`, ``ViTExperimentConfig``,
``DetrExperimentConfig``, ``TrainDataConfig``) live in :mod:`pcreg.engine.configs`, above the
packages that define those parts.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from pcreg.errors import InputError

__all__ = [
    "ORIENTATION_SEARCHES",
    "ClassifierTrainConfig",
    "ConfigError",
    "DetectionDataConfig",
    "DetectionLossConfig",
    "DetectionTrainConfig",
    "DigitsDataConfig",
    "EvalDatasetConfig",
    "EvaluateConfig",
    "GenerateConfig",
    "OptimConfig",
    "SearchConfig",
    "ShapesGenerateConfig",
    "TrainLoopConfig",
    "from_dict",
    "to_dict",
]

T = TypeVar("T")


class ConfigError(InputError):
    """A configuration key or value is wrong; ``source`` is the dotted key path."""


def _check_scalar(value: Any, tp: Any, path: str) -> Any:
    if tp is Any:
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float, str, bool):
        if (tp is int and isinstance(value, bool)) or not isinstance(value, tp):
            raise ConfigError(path, f"expected {tp.__name__}, got {value!r}")
        return value
    return value


def _convert(value: Any, tp: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise ConfigError(path, f"expected a mapping for {tp.__name__}, got {value!r}")
        return from_dict(tp, value, _prefix=path)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise ConfigError(path, "must not be null")
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(value, arg, path)
            except ConfigError as err:
                errors.append(err.problem)
        raise ConfigError(path, "; ".join(errors))
    if origin is typing.Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise ConfigError(path, f"must be one of {list(choices)}, got {value!r}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            raise ConfigError(path, f"expected a list, got {value!r}")
        (item_tp, *_) = typing.get_args(tp) or (Any,)
        items = [_convert(v, item_tp, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(path, f"expected a mapping, got {value!r}")
        return dict(value)
    return _check_scalar(value, tp, path)


def from_dict(cls: type[T], data: Mapping[str, Any], _prefix: str = "") -> T:
    """Build dataclass ``cls`` from a mapping; unknown keys and wrong types raise
    :class:`ConfigError` naming the dotted key (``train.lr``) and suggesting the nearest one."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{_prefix}.{key}" if _prefix else str(key)
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(path, f"unknown config key{hint}; known keys: {sorted(fields)}")
        kwargs[key] = _convert(value, hints[key], path)
    try:
        return cls(**kwargs)
    except TypeError as err:  # a required field is missing
        raise ConfigError(_prefix or cls.__name__, str(err)) from None
    except ValueError as err:  # a value the section refuses (its __post_init__)
        raise ConfigError(_prefix or cls.__name__, str(err)) from None


def to_dict(obj: Any) -> dict[str, Any]:
    """Dataclass tree -> plain dict (for JSON, checkpoints and run records)."""
    return dataclasses.asdict(obj)


# --------------------------------------------------------------------------- ViT (digits)
@dataclasses.dataclass
class DigitsDataConfig:
    """The stratified digits split (see :func:`pcreg.data.vision.digits.load_digits_split`)."""

    seed: int = 0
    test_fraction: float = 0.2


@dataclasses.dataclass
class ClassifierTrainConfig:
    """AdamW with linear warm-up and cosine decay (per step), label smoothing, clipping."""

    epochs: int = 80
    batch_size: int = 64
    lr: float = 3e-3
    weight_decay: float = 0.05
    warmup_epochs: int = 5
    label_smoothing: float = 0.1
    grad_clip: float = 1.0
    max_shift: int = 0
    seed: int = 0
    num_threads: int = 0

    def __post_init__(self) -> None:
        _at_least_one(epochs=self.epochs, batch_size=self.batch_size)


# --------------------------------------------------------------------------- DETR (shapes)
@dataclasses.dataclass
class ShapesGenerateConfig:
    """Write the synthetic shapes (``pcreg.data.vision.shapes``) when the data is missing:
    the train split from ``seed``, the validation split from ``seed + 1``."""

    train_images: int = 6000
    val_images: int = 500
    seed: int = 0


@dataclasses.dataclass
class DetectionDataConfig:
    """COCO layout: ``root/<split>/`` images and ``root/annotations/<split>.json``."""

    root: str = "outputs/data/shapes"
    train_split: str = "train"
    val_split: str = "val"
    generate: ShapesGenerateConfig | None = None


@dataclasses.dataclass
class DetectionLossConfig:
    """Matching costs and loss weights (DETR: class 1, L1 5, GIoU 2; no-object weight 0.1)."""

    cost_class: float = 1.0
    cost_bbox: float = 5.0
    cost_giou: float = 2.0
    weight_ce: float = 1.0
    weight_bbox: float = 5.0
    weight_giou: float = 2.0
    eos_coef: float = 0.1


@dataclasses.dataclass
class DetectionTrainConfig:
    """AdamW, one 10x learning-rate drop at ``lr_drop_fraction`` of training, clipping."""

    epochs: int = 30
    batch_size: int = 16
    lr: float = 2e-4
    lr_backbone: float = 2e-4
    weight_decay: float = 1e-4
    lr_drop_fraction: float = 0.8
    grad_clip: float = 0.1
    seed: int = 0
    num_threads: int = 0
    eval_every: int = 5
    eval_limit: int | None = 100
    device: str = "auto"  # auto (cuda when torch sees one, else cpu) | cpu | cuda | cuda:N


# --------------------------------------------------------------------------- evaluate
@dataclasses.dataclass
class EvalDatasetConfig:
    """Which pairs: ``layout`` threedmatch (3DMatch layout, ``benchmark`` = metadata stem such
    as 3DMatch / 3DLoMatch / val; default 3DMatch) or kitti (``benchmark`` = split: train, val
    or test; default test)."""

    layout: str = "threedmatch"
    root: str = ""
    benchmark: str | None = None  # None: the layout's default, 3DMatch / test
    benchmark_dir: str | None = None  # official gt.log/gt.info folder; default: if present


@dataclasses.dataclass
class EvaluateConfig:
    """``pcreg evaluate``: a checkpoint over a benchmark -> Markdown table + JSON."""

    checkpoint: str = ""
    dataset: EvalDatasetConfig = dataclasses.field(default_factory=EvalDatasetConfig)
    limit: int | None = None
    device: str = "cpu"
    workers: int = 1  # CPU: > 1 spreads the pairs over worker processes (Registrar.batch)
    out_dir: str = "outputs/evaluate"
    overwrite: bool = False


# --------------------------------------------------------------------------- train
@dataclasses.dataclass
class GenerateConfig:
    """Generate a synthetic dataset into ``data.root`` when it holds no metadata yet."""

    kind: str = "indoor"  # indoor | outdoor
    train_scenes: int = 40
    val_scenes: int = 4
    seed: int = 0  # validation scenes use seed + 1_000_000: never trained on


@dataclasses.dataclass
class OptimConfig:
    """Adam; learning rate = lr * warm-up(step) * decay(epoch)."""

    lr: float = 1e-4
    weight_decay: float = 1e-6
    scheduler: str = "exponential"  # exponential | step | cosine | none
    gamma: float = 0.95
    step_epochs: int = 1  # decay every this many epochs (exponential / step)
    warmup_steps: int = 0
    grad_clip: float = 0.0  # max gradient norm, 0 = off
    amp: bool = False  # mixed precision (CUDA only)


@dataclasses.dataclass
class TrainLoopConfig:
    epochs: int = 40
    max_steps_per_epoch: int | None = None
    seed: int = 0
    checkpoint_every: int = 200  # steps
    resume: bool = False
    # start a new run from another run's weights (a training checkpoint or exported weights);
    # tensors whose name or shape differ, and kernel-point buffers, keep their fresh values
    init_from: str | None = None
    out_dir: str = "outputs/train"
    overwrite: bool = False
    num_threads: int = 0
    log_every: int = 10
    device: str = "auto"  # auto | cpu | cuda | cuda:N

    def __post_init__(self) -> None:
        _at_least_one(epochs=self.epochs, checkpoint_every=self.checkpoint_every,
                      log_every=self.log_every)  # fmt: skip


def _at_least_one(**counts: int | None) -> None:
    """Refuse a count under 1 (``train.epochs=0`` was an IndexError after the data was made)."""
    for name, value in counts.items():
        if value is not None and not (isinstance(value, int) and value >= 1):
            raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")


#: values of :attr:`SearchConfig.orientation_search`
ORIENTATION_SEARCHES = ("none", "manhattan")


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Inference-time settings of the orientation search.

    orientation_search: ``"none"`` (the pair as given) or ``"manhattan"`` (the 24 cube
        rotations between Manhattan frames; for rooms, with a network trained on small
        rotations).
    orientation_keep: Manhattan: run the network only on the hypotheses whose pre-network
        ranking score is at least this fraction of the best (0 runs all 24; 0.7 measured on
        generated rooms: a clear winner costs one forward pass, an ambiguous pair several).
    orientation_rank_voxel: grid cell (metres) of the pre-network ranking.
    """

    orientation_search: str = "none"
    orientation_keep: float = 0.7
    orientation_rank_voxel: float = 0.2

    def __post_init__(self) -> None:
        if self.orientation_search not in ORIENTATION_SEARCHES:
            raise ValueError(
                f"orientation_search must be one of {ORIENTATION_SEARCHES}, "
                f"got {self.orientation_search!r}"
            )
        if not 0.0 <= float(self.orientation_keep) <= 1.0:
            raise ValueError(
                f"orientation_keep must lie between 0 and 1, got {self.orientation_keep:g}"
            )
        if not float(self.orientation_rank_voxel) > 0:
            raise ValueError(
                f"orientation_rank_voxel must be positive, got {self.orientation_rank_voxel}"
            )
