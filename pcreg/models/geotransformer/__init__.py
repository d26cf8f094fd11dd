"""GeoTransformer-style registration network (Qin et al., CVPR 2022 / TPAMI 2023).

The configuration imports without torch (the ONNX Runtime path reads it); the network's modules
load on first use of their names."""

import importlib

from pcreg.models.geotransformer.config import (
    GeoTransformerConfig,
    kitti_config,
    threedmatch_config,
)

_MODEL_NAMES = (
    "GeoTransformer",
    "Patches",
    "ReferenceEncoding",
    "RegistrationOutput",
    "build_geotransformer",
)

__all__ = [
    "GeoTransformer",
    "GeoTransformerConfig",
    "Patches",
    "ReferenceEncoding",
    "RegistrationOutput",
    "build_geotransformer",
    "kitti_config",
    "threedmatch_config",
]


def __getattr__(name: str):  # lazy: torch loads with the model, not with the configuration
    if name in _MODEL_NAMES:
        return getattr(importlib.import_module("pcreg.models.geotransformer.model"), name)
    raise AttributeError(f"module 'pcreg.models.geotransformer' has no attribute {name!r}")
