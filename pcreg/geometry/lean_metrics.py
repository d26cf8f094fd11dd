"""The errors of one estimated pose against a truth, in numpy: the quantities of
:func:`pcreg.geometry.metrics.pose_errors` (RRE, RTE, RMSE) without torch, for the command
line's lean path (``pcreg register --gt`` imported torch for them: 0.7-0.9 s of a 1 s command,
issue #44). Not named ``pose_errors``: a submodule of that name would replace the package's
lazily exported :func:`pcreg.geometry.pose_errors` once imported."""

from __future__ import annotations

import numpy as np

__all__ = ["pose_errors_np"]


def pose_errors_np(
    est_transform: np.ndarray, gt_transform: np.ndarray, points: np.ndarray | None = None
) -> dict[str, float]:
    """``{"rre_deg", "rte_m"}`` of ``est_transform`` against ``gt_transform`` (both ``(4, 4)``
    ``T_ref_src``), and with ``points (N, 3)`` (the source) ``"rmse_m"``: the root mean square
    distance between the points moved by the two. Float64 throughout; the rotation's angle as
    :func:`~pcreg.geometry.metrics.relative_rotation_error_deg` takes it (``atan2`` of the
    skew part's norm and ``(trace - 1) / 2``: well conditioned at every angle, no NaN for a
    slightly non-orthonormal truth). Lengths in the transforms' units."""
    est = np.asarray(est_transform, np.float64)
    gt = np.asarray(gt_transform, np.float64)
    rel = est[:3, :3].T @ gt[:3, :3]
    cos = (np.trace(rel) - 1.0) / 2.0
    skew = rel - rel.T
    sin = np.linalg.norm([skew[2, 1], skew[0, 2], skew[1, 0]]) / 2.0
    out = {
        "rre_deg": float(np.degrees(np.arctan2(sin, cos))),
        "rte_m": float(np.linalg.norm(est[:3, 3] - gt[:3, 3])),
    }
    if points is not None:
        p = np.asarray(points, np.float64).reshape(-1, 3)
        diff = p @ (est[:3, :3] - gt[:3, :3]).T + (est[:3, 3] - gt[:3, 3])
        out["rmse_m"] = float(np.sqrt((diff**2).sum(axis=1).mean())) if len(p) else 0.0
    return out
