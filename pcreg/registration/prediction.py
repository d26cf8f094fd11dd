"""One pair's network output in numpy (:class:`Prediction`): what the torch network
(:class:`pcreg.registration.network.Registrar`) and its ONNX Runtime twin
(:class:`pcreg.registration.onnx_network.OnnxRegistrar`) both return. Torch-free."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Prediction"]


@dataclass
class Prediction:
    """One pair's network output in numpy.

    ``transform`` ``(4, 4)`` float64 ``T_ref_src``; dense correspondences ``src_corr_points`` /
    ``ref_corr_points`` ``(C, 3)`` float64 (source / reference frame, metres) with confidences
    ``corr_scores (C,)``; ``time_s``: wall time in seconds.
    """

    transform: np.ndarray
    src_corr_points: np.ndarray
    ref_corr_points: np.ndarray
    corr_scores: np.ndarray
    time_s: float

    def consensus(self, radius: float) -> float:
        """Sum of the confidences of the correspondences that ``transform`` maps within
        ``radius`` metres of their partners: how well the estimate is supported."""
        if len(self.src_corr_points) == 0:
            return 0.0
        moved = self.src_corr_points @ self.transform[:3, :3].T + self.transform[:3, 3]
        close = np.linalg.norm(moved - self.ref_corr_points, axis=1) < radius
        return float(self.corr_scores[close].sum())

    def transform_rotated(self, src_rot: np.ndarray, ref_rot: np.ndarray) -> np.ndarray:
        """``(4, 4)``: the transform of :meth:`rotated`, without moving the points."""
        t = np.eye(4)
        t[:3, :3] = ref_rot.T @ self.transform[:3, :3] @ src_rot
        t[:3, 3] = ref_rot.T @ self.transform[:3, 3]
        return t

    def rotated(self, src_rot: np.ndarray, ref_rot: np.ndarray) -> Prediction:
        """This prediction for the pair ``(src_rot @ src, ref_rot @ ref)`` expressed for the
        original ``(src, ref)``: ``T <- ref_rot^T T src_rot`` and the points rotated back."""
        t = np.eye(4)
        t[:3, :3] = ref_rot.T @ self.transform[:3, :3] @ src_rot
        t[:3, 3] = ref_rot.T @ self.transform[:3, 3]
        return Prediction(
            t,
            self.src_corr_points @ src_rot,
            self.ref_corr_points @ ref_rot,
            self.corr_scores,
            self.time_s,
        )

    def scaled(self, factor: float) -> Prediction:
        """This prediction for the pair scaled by ``1 / factor`` about the origin: the
        translation and the points times ``factor``, the rotation and confidences as they
        are (a network given a pair scaled down by ``s`` answers in its units: ``scaled(1 /
        s)`` is the answer in the pair's)."""
        if factor == 1.0:
            return self
        t = self.transform.copy()
        t[:3, 3] *= factor
        return Prediction(t, self.src_corr_points * factor, self.ref_corr_points * factor,
                          self.corr_scores, self.time_s)  # fmt: skip
