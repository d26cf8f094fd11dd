"""Typed configuration schemas and a strict loader.

Hydra composes YAML into a plain mapping; :func:`from_dict` turns it into the dataclass tree
declared here and fails on the first key it does not know, naming its dotted path and the
closest known key, before anything expensive runs.
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
    "ClassifierTrainConfig",
    "ConfigError",
    "DigitsDataConfig",
    "EvalDatasetConfig",
    "EvaluateConfig",
    "TrainConfig",
    "ViTExperimentConfig",
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


def to_dict(obj: Any) -> dict[str, Any]:
    """Dataclass tree -> plain dict (for JSON, checkpoints and run records)."""
    return dataclasses.asdict(obj)


# --------------------------------------------------------------------------- ViT (digits)
from pcreg.models.vit import ViTConfig  # noqa: E402  (schemas below reuse the model's fields)


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


@dataclasses.dataclass
class ViTExperimentConfig:
    """``pcreg vit train|evaluate``: model, data, recipe, outputs."""

    model: ViTConfig = dataclasses.field(default_factory=ViTConfig)
    data: DigitsDataConfig = dataclasses.field(default_factory=DigitsDataConfig)
    train: ClassifierTrainConfig = dataclasses.field(default_factory=ClassifierTrainConfig)
    out_dir: str = "outputs/vit"
    overwrite: bool = False
    checkpoint: str | None = None
    rollout_images: int = 12


# --------------------------------------------------------------------------- DETR (shapes)
from pcreg.models.detr.detr import DetrConfig  # noqa: E402


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


@dataclasses.dataclass
class DetrExperimentConfig:
    """``pcreg detr train|evaluate``."""

    model: DetrConfig = dataclasses.field(default_factory=DetrConfig)
    data: DetectionDataConfig = dataclasses.field(default_factory=DetectionDataConfig)
    loss: DetectionLossConfig = dataclasses.field(default_factory=DetectionLossConfig)
    train: DetectionTrainConfig = dataclasses.field(default_factory=DetectionTrainConfig)
    out_dir: str = "outputs/detr"
    overwrite: bool = False
    checkpoint: str | None = None


# --------------------------------------------------------------------------- evaluate
@dataclasses.dataclass
class EvalDatasetConfig:
    """Which pairs: ``layout`` threedmatch (3DMatch layout, ``benchmark`` = metadata stem such
    as 3DMatch / 3DLoMatch / val) or kitti (``benchmark`` = split)."""

    layout: str = "threedmatch"
    root: str = ""
    benchmark: str = "3DMatch"
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
from pcreg.data.transforms import AugmentationConfig  # noqa: E402
from pcreg.losses.total import LossConfig  # noqa: E402
from pcreg.models.geotransformer.config import GeoTransformerConfig  # noqa: E402


@dataclasses.dataclass
class GenerateConfig:
    """Generate a synthetic dataset into ``data.root`` when it holds no metadata yet."""

    kind: str = "indoor"  # indoor | outdoor
    train_scenes: int = 40
    val_scenes: int = 4
    seed: int = 0  # validation scenes use seed + 1_000_000: never trained on


@dataclasses.dataclass
class TrainDataConfig:
    layout: str = "threedmatch"  # threedmatch | kitti (directory layout of data.root)
    root: str = ""
    train_split: str = "train"
    val_split: str = "val"
    generate: GenerateConfig | None = None
    augmentation: AugmentationConfig = dataclasses.field(default_factory=AugmentationConfig)
    batch_size: int = 1  # pairs per process and step
    point_limit: int | None = 30000  # random subset per cloud in training (GeoTransformer)
    max_val_pairs: int | None = 50
    success: str = "rmse"  # rmse (RMSE of the moved source <= 0.2 m) | kitti (RRE<5, RTE<2)


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


@dataclasses.dataclass
class TrainConfig:
    """``pcreg train``: the registration model on a dataset."""

    model: GeoTransformerConfig = dataclasses.field(default_factory=GeoTransformerConfig)
    data: TrainDataConfig = dataclasses.field(default_factory=TrainDataConfig)
    loss: LossConfig = dataclasses.field(default_factory=LossConfig)
    optim: OptimConfig = dataclasses.field(default_factory=OptimConfig)
    train: TrainLoopConfig = dataclasses.field(default_factory=TrainLoopConfig)
