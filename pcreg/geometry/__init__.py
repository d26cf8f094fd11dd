"""Rigid-motion geometry: transforms, weighted Procrustes and registration metrics.

The names below load lazily (PEP 562): importing :mod:`pcreg.geometry.manhattan`,
:mod:`pcreg.geometry.cube_ranking` or :mod:`pcreg.geometry.clouds` (numpy and scipy only)
does not import the torch modules (``metrics``, ``procrustes``, ``transforms``)."""

import importlib

_EXPORTS = {
    "covariance_rmse": "metrics",
    "feature_matching_recall": "metrics",
    "inlier_ratio": "metrics",
    "pose_errors": "metrics",
    "registration_recall": "metrics",
    "relative_rotation_error_deg": "metrics",
    "relative_translation_error": "metrics",
    "rotation_to_quaternion": "metrics",
    "transform_rmse": "metrics",
    "weighted_procrustes": "procrustes",
    "apply_transform": "transforms",
    "compose_transforms": "transforms",
    "invert_transform": "transforms",
    "make_transform": "transforms",
    "orthonormalize_rotation": "transforms",
    "random_rotation": "transforms",
    "random_transform": "transforms",
    "rotation_from_axis_angle": "transforms",
}

__all__ = [
    "apply_transform",
    "compose_transforms",
    "covariance_rmse",
    "feature_matching_recall",
    "inlier_ratio",
    "invert_transform",
    "make_transform",
    "orthonormalize_rotation",
    "pose_errors",
    "random_rotation",
    "random_transform",
    "registration_recall",
    "relative_rotation_error_deg",
    "relative_translation_error",
    "rotation_from_axis_angle",
    "rotation_to_quaternion",
    "transform_rmse",
    "weighted_procrustes",
]


def __getattr__(name: str):  # lazy: torch loads with the first name that needs it
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"pcreg.geometry.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'pcreg.geometry' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
