"""GeoTransformer-style registration network (Qin et al., CVPR 2022 / TPAMI 2023)."""

from pcreg.models.geotransformer.config import (
    GeoTransformerConfig,
    kitti_config,
    threedmatch_config,
)
from pcreg.models.geotransformer.model import GeoTransformer, Patches, RegistrationOutput

__all__ = [
    "GeoTransformer",
    "GeoTransformerConfig",
    "Patches",
    "RegistrationOutput",
    "kitti_config",
    "threedmatch_config",
]
