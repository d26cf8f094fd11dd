"""Classical registration pipelines built on Open3D, used as baselines and fallbacks."""

from pcreg.baselines.fpfh_ransac import ClassicalResult, fpfh_ransac

__all__ = ["ClassicalResult", "fpfh_ransac"]
