"""Configuration of the registration network (defaults: GeoTransformer's 3DMatch setting,
DESIGN §6; :func:`kitti_config` gives the KITTI one)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

__all__ = ["GeoTransformerConfig", "kitti_config", "threedmatch_config"]


@dataclass(frozen=True)
class GeoTransformerConfig:
    """The network's architecture and preprocessing; lengths in metres unless marked as a
    factor of the voxel size. Inference-time choices (the orientation search) are not here:
    :class:`pcreg.registration.search.SearchConfig`."""

    # preprocessing (the neighbor pyramid the backbone is trained with)
    voxel_size: float = 0.025
    num_stages: int = 4
    neighbor_limits: tuple[int, ...] = (38, 36, 36, 38)
    # per-point input features (pcreg.ops.features): "ones" (input_dim 1) or "fpfh"
    # (input_dim 34: the constant + FPFH with normals / histograms over fpfh_radii metres)
    input_features: str = "ones"
    fpfh_radii: tuple[float, float] = (0.1, 0.25)
    # KPConv backbone
    input_dim: int = 1
    init_dim: int = 64
    output_dim: int = 256
    kernel_size: int = 15
    init_radius: float = 2.5  # x voxel_size
    init_sigma: float = 2.0  # x voxel_size
    group_norm: int = 32
    # KPConv offsets in local reference frames: rotation invariant by construction (pcreg's
    # shipped models; off in the published configuration, whose checkpoints expect it off)
    rotation_invariant: bool = False
    # "frame": offsets in the full local frame; "cylindrical": only (in-plane distance, height
    # along the local normal), which stays invariant where the in-plane axes are ill-defined
    invariant_kernel: str = "frame"
    # geometric transformer
    hidden_dim: int = 256
    coarse_dim: int = 256
    num_heads: int = 4
    blocks: tuple[str, ...] = field(default=("self", "cross") * 3)
    sigma_d: float = 0.2
    sigma_a: float = 15.0
    angle_k: int = 3
    reduction: str = "max"
    # superpoint matching
    num_correspondences: int = 256
    dual_normalization: bool = True
    # point matching and LGR
    num_points_in_patch: int = 64
    sinkhorn_iterations: int = 100
    topk: int = 3
    mutual: bool = True
    confidence_threshold: float = 0.05
    acceptance_radius: float = 0.1
    min_correspondences: int = 3
    refinement_steps: int = 5

    @property
    def search_radius(self) -> float:
        """Stage-0 neighborhood radius in metres."""
        return self.init_radius * self.voxel_size

    @property
    def backbone_coarse_dim(self) -> int:
        return self.init_dim * 2**self.num_stages


def threedmatch_config(**overrides: object) -> GeoTransformerConfig:
    """GeoTransformer's published 3DMatch configuration."""
    return replace(GeoTransformerConfig(), **overrides)


def kitti_config(**overrides: object) -> GeoTransformerConfig:
    """GeoTransformer's published KITTI configuration."""
    base = GeoTransformerConfig(
        voxel_size=0.3,
        num_stages=5,
        neighbor_limits=(40, 40, 40, 40, 40),
        init_radius=4.25,
        init_sigma=2.0,
        hidden_dim=128,
        sigma_d=4.8,
        num_points_in_patch=128,
        topk=2,
        acceptance_radius=0.6,
    )
    return replace(base, **overrides)
