"""Rigid-motion geometry: transforms, weighted Procrustes and registration metrics."""

from pcreg.geometry.metrics import (
    covariance_rmse,
    feature_matching_recall,
    inlier_ratio,
    pose_errors,
    registration_recall,
    relative_rotation_error_deg,
    relative_translation_error,
    rotation_to_quaternion,
    transform_rmse,
)
from pcreg.geometry.procrustes import weighted_procrustes
from pcreg.geometry.transforms import (
    apply_transform,
    compose_transforms,
    invert_transform,
    make_transform,
    orthonormalize_rotation,
    random_rotation,
    random_transform,
    rotation_from_axis_angle,
)

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
