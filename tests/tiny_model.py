"""A randomly initialised, tiny registration model: fast plumbing tests of everything that
takes ``--model PATH`` (its estimates are meaningless). Shared by ``conftest.py`` and the CLI
harness."""

from __future__ import annotations

from pathlib import Path


def save_tiny_checkpoint(path: Path) -> Path:
    """Write the tiny model (seed 0) as a loadable checkpoint at ``path``."""
    import torch

    from pcreg.models.geotransformer import GeoTransformerConfig, build_geotransformer
    from pcreg.registration.network import save_model_checkpoint

    torch.manual_seed(0)
    cfg = GeoTransformerConfig(
        voxel_size=0.05,
        init_dim=8,
        group_norm=4,
        hidden_dim=32,
        coarse_dim=32,
        output_dim=32,
        num_points_in_patch=16,
        sinkhorn_iterations=10,
        sigma_d=0.4,
        acceptance_radius=0.2,
        neighbor_limits=(20, 20, 20, 20),
    )
    save_model_checkpoint(path, build_geotransformer(cfg))
    return path
