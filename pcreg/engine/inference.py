"""The one inference path: load a registration model, preprocess a pair, run, postprocess.

``api.register``, ``pcreg evaluate`` and odometry all go through :class:`Registrar`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from pcreg.data.collate import collate_pairs
from pcreg.engine.checkpoint import load_checkpoint, save_checkpoint
from pcreg.errors import CorruptFileError
from pcreg.models.geotransformer import GeoTransformer, GeoTransformerConfig

__all__ = ["Prediction", "Registrar", "save_model_checkpoint"]


@dataclass
class Prediction:
    """``transform`` (4, 4) float64 ``T_ref_src``; dense correspondences ``(C, 3)`` float64 in
    the reference / source frames with confidences ``(C,)``; wall time in seconds."""

    transform: np.ndarray
    ref_corr_points: np.ndarray
    src_corr_points: np.ndarray
    corr_scores: np.ndarray
    time_s: float


def save_model_checkpoint(
    path: str | os.PathLike[str], model: GeoTransformer, overwrite: bool = False, **extra: object
) -> Path:
    """A loadable checkpoint: weights + the model configuration."""
    return save_checkpoint(
        path,
        "geotransformer",
        model.state_dict(),
        overwrite=overwrite,
        config=dataclasses.asdict(model.config),
        **extra,
    )


class Registrar:
    """A model ready for inference on a device. ``Registrar(model)`` or
    ``Registrar.from_checkpoint(path)``; call ``registrar(ref, src)`` with ``(N, 3)`` arrays."""

    def __init__(
        self,
        model: GeoTransformer,
        device: str | torch.device = "cpu",
        neighbor_backend: str = "auto",
    ) -> None:
        self.model = model.to(device).eval()
        self.device = torch.device(device)
        self.backend = neighbor_backend

    @classmethod
    def from_checkpoint(
        cls, path: str | os.PathLike[str], device: str | torch.device = "cpu", **overrides: object
    ) -> Registrar:
        ckpt = load_checkpoint(path)
        if ckpt.get("kind") == "geotransformer-train":  # pcreg train's last.pt / best.pt
            config = ckpt["model_config"]
        elif ckpt.get("kind") == "geotransformer":
            config = ckpt["config"]
        else:
            raise CorruptFileError(
                path, f"is a {ckpt.get('kind')!r} checkpoint, not a registration model"
            )
        fields = {f.name for f in dataclasses.fields(GeoTransformerConfig)}
        cfg_dict = {
            k: tuple(v) if isinstance(v, list) else v for k, v in config.items() if k in fields
        }
        cfg = GeoTransformerConfig(**{**cfg_dict, **overrides})
        model = GeoTransformer(cfg)
        model.load_state_dict({k: v.float() for k, v in ckpt["model"].items()})
        return cls(model, device)

    @property
    def config(self) -> GeoTransformerConfig:
        return self.model.config

    def __call__(self, ref: np.ndarray, src: np.ndarray) -> Prediction:
        """Register one pair: ``ref (M, 3)``, ``src (N, 3)`` in metres."""
        return self.batch([(ref, src)])[0]

    @torch.no_grad()
    def batch(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[Prediction]:
        """Register several ``(ref, src)`` pairs in one forward pass (one pyramid over all
        clouds). Each prediction's ``time_s`` is the whole batch's wall time."""
        if not pairs:
            return []
        cfg = self.config
        start = time.perf_counter()
        batch = collate_pairs(
            [torch.as_tensor(np.asarray(r, np.float32)) for r, _ in pairs],
            [torch.as_tensor(np.asarray(s, np.float32)) for _, s in pairs],
            voxel_size=cfg.voxel_size,
            num_stages=cfg.num_stages,
            search_radius=cfg.search_radius,
            neighbor_limits=cfg.neighbor_limits,
            input_features=cfg.input_features,
            fpfh_radii=cfg.fpfh_radii,
            backend=self.backend,
        ).to(self.device)
        out = self.model(batch.pyramid, batch.feats, len(pairs))
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elapsed = time.perf_counter() - start
        f64 = lambda t: t.detach().cpu().double().numpy()  # noqa: E731
        return [
            Prediction(
                f64(out.transform[i]),
                f64(out.ref_corr_points[i]),
                f64(out.src_corr_points[i]),
                f64(out.corr_scores[i]),
                elapsed,
            )
            for i in range(len(pairs))
        ]
