"""Experiment configs that embed the configs of their parts: the model's, the augmentation's and
the loss's, each defined beside the code it configures.

They sit here, above ``models``, ``data`` and ``losses`` (floor 2 of docs/architecture.md,
"Import layers"), so that :mod:`pcreg.config` stays a leaf; :func:`pcreg.config.from_dict`
builds them as strictly as any other schema::

    cfg = from_dict(TrainConfig, compose("train", overrides))
"""

from __future__ import annotations

import dataclasses

from pcreg.config import (
    ClassifierTrainConfig,
    DetectionDataConfig,
    DetectionLossConfig,
    DetectionTrainConfig,
    DigitsDataConfig,
    GenerateConfig,
    OptimConfig,
    SearchConfig,
    TrainLoopConfig,
)
from pcreg.data.transforms import AugmentationConfig
from pcreg.losses.total import LossConfig
from pcreg.models.detr.detr import DetrConfig
from pcreg.models.geotransformer.config import GeoTransformerConfig
from pcreg.models.vit import ViTConfig

__all__ = ["DetrExperimentConfig", "TrainConfig", "TrainDataConfig", "ViTExperimentConfig"]


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
    # train: the weights to start from (a DETR checkpoint, or "shipped"); None: random
    init: str | None = None
    # a COCO results file (JSON list of image_id, category_id, bbox [x, y, w, h] px, score)
    # of the final validation detections: evaluate's, and train's last evaluation
    detections: str | None = None


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
class TrainConfig:
    """``pcreg train``: the registration model on a dataset."""

    model: GeoTransformerConfig = dataclasses.field(default_factory=GeoTransformerConfig)
    # how the trained network is used (stored in its checkpoints; never part of the model)
    inference: SearchConfig = dataclasses.field(default_factory=SearchConfig)
    data: TrainDataConfig = dataclasses.field(default_factory=TrainDataConfig)
    loss: LossConfig = dataclasses.field(default_factory=LossConfig)
    optim: OptimConfig = dataclasses.field(default_factory=OptimConfig)
    train: TrainLoopConfig = dataclasses.field(default_factory=TrainLoopConfig)
