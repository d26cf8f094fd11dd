"""GeoTransformer-style registration network (Qin et al., CVPR 2022 / TPAMI 2023)."""

from pcreg.models.geotransformer.config import (
    GeoTransformerConfig,
    kitti_config,
    threedmatch_config,
)
from pcreg.models.geotransformer.model import (
    GeoTransformer,
    Patches,
    ReferenceEncoding,
    RegistrationOutput,
    build_geotransformer,
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
