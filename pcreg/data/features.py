"""Per-point input features for the backbone: re-exported from :mod:`pcreg.ops.features`, where
they live so that both ``data`` (collate) and ``models`` (the input width check) can use them
(docs/architecture.md, "Import layers")."""

from pcreg.ops.features import INPUT_FEATURE_DIMS, fpfh_features, input_features

__all__ = ["INPUT_FEATURE_DIMS", "fpfh_features", "input_features"]
