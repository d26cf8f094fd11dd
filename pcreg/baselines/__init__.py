"""Classical registration pipelines built on Open3D, used as baselines and fallbacks."""

from pcreg.baselines.fpfh_ransac import ClassicalResult, fpfh_ransac
from pcreg.baselines.icp import IcpResult, downsample_with_normals, icp_refine

__all__ = ["ClassicalResult", "IcpResult", "downsample_with_normals", "fpfh_ransac", "icp_refine"]
