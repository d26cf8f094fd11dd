"""The working frame of a pair: each cloud shifted to its own median in float64 before
anything casts it to float32, and a result mapped back to the user's frames."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pcreg.registration.result import RegistrationResult

__all__ = ["to_user_frame", "working_origin"]


def working_origin(points: np.ndarray) -> np.ndarray:
    """``(3,) float64``: the per-axis median of ``points``, the origin of the frame each cloud
    of a pair is registered in. Subtracting it in float64 before anything casts to float32
    keeps georeferenced coordinates (UTM: 4.2e6 m, where float32 steps are 0.5 m) exact, and
    a shift of the input shifts it by the same amount, so the estimate does not change. Each
    cloud gets its own: a source at the origin and a reference at UTM coordinates would
    otherwise put one of them 4.2e6 m from the working origin."""
    return np.median(np.asarray(points, np.float64), axis=0)


def to_user_frame(result: RegistrationResult, origins: np.ndarray) -> RegistrationResult:
    """Map a result estimated on the source shifted by ``-origins[0]`` and the reference by
    ``-origins[1]`` back to the user's frames: ``T = Tr(o_ref) @ T_w @ Tr(-o_src)``,
    correspondences shifted back by their cloud's origin."""
    o_src, o_ref = np.asarray(origins, np.float64)
    transform = np.asarray(result.transform, np.float64).copy()
    transform[:3, 3] += o_ref - transform[:3, :3] @ o_src
    result.transform = transform
    result.src_corr_points = np.asarray(result.src_corr_points, np.float64).reshape(-1, 3) + o_src
    result.ref_corr_points = np.asarray(result.ref_corr_points, np.float64).reshape(-1, 3) + o_ref
    return result
