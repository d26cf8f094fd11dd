"""The registration network ready for inference: preprocess ``(src, ref)`` pairs, run, return
numpy predictions.

:class:`Registrar` only runs the network on the clouds as given. Which orientations it is
tried under is the orientation search's business (:mod:`pcreg.registration.search`), and
everything around it (validation, scale, ICP, the result) the pipeline's
(:mod:`pcreg.registration.pipeline`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence

import numpy as np
import torch

from pcreg.data.collate import PairBatch, collate_pairs
from pcreg.engine.threads import single_threaded_blas
from pcreg.models.geotransformer import GeoTransformer, GeoTransformerConfig, build_geotransformer
from pcreg.registration.prediction import Prediction

__all__ = ["Prediction", "Registrar"]


class Registrar:
    """A :class:`GeoTransformer` on a device, called on ``(src, ref)`` pairs of ``(N, 3)``
    arrays in metres.

    Build with ``Registrar(model)`` or :meth:`from_state` (a configuration and weights, as a
    checkpoint stores them: :func:`pcreg.registration.loading.load_network`).
    """

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
    def from_state(
        cls,
        config: GeoTransformerConfig | dict,
        state: dict[str, torch.Tensor],
        device: str | torch.device = "cpu",
        neighbor_backend: str = "auto",
    ) -> Registrar:
        """A registrar from an architecture configuration (a dataclass, or a dict whose
        unknown keys are ignored and lists become tuples) and a state dict (any float dtype:
        cast to float32)."""
        if isinstance(config, dict):
            fields = {f.name for f in dataclasses.fields(GeoTransformerConfig)}
            config = GeoTransformerConfig(
                **{
                    k: tuple(v) if isinstance(v, list) else v
                    for k, v in config.items()
                    if k in fields
                }
            )
        model = build_geotransformer(config)
        model.load_state_dict({k: v.float() for k, v in state.items()})
        return cls(model, device, neighbor_backend)

    @property
    def config(self) -> GeoTransformerConfig:
        return self.model.config

    def __call__(self, src: np.ndarray, ref: np.ndarray) -> Prediction:
        """The network on one pair as given: ``src (N, 3)``, ``ref (M, 3)`` in metres."""
        return self.forward([(src, ref)])[0]

    @torch.no_grad()
    @single_threaded_blas
    def forward(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[Prediction]:
        """The network on ``(src, ref)`` pairs as given, in one padded batch (each
        prediction's ``time_s`` is the whole batch's wall time)."""
        if not pairs:
            return []
        start = time.perf_counter()
        return self._run(self.collate(pairs), start)

    @torch.no_grad()
    @single_threaded_blas
    def hypotheses(
        self, src: np.ndarray, ref: np.ndarray, rotations: np.ndarray
    ) -> list[Prediction]:
        """The network on ``(rot @ src, ref)`` for every ``rot`` of ``rotations (H, 3, 3)``;
        each prediction is for the rotated source.

        The pair is voxelised and its neighbor pyramid built once: rotating a pyramid's
        points gives a valid pyramid of the rotated cloud (same neighbors, a rotated voxel
        grid), so each hypothesis costs only the network, and what a rotation of the source
        does not change is encoded once (:class:`~pcreg.models.geotransformer.model.
        ReferenceEncoding`). Input features must not change under rotation (ones, or FPFH
        with centroid-oriented normals)."""
        batch = self.collate([(src, ref)])
        n_ref = [int(n[0]) for n in batch.pyramid.lengths]
        reference = self.model.encode_reference(batch.pyramid, batch.feats, 1)
        preds = []
        for rot in np.asarray(rotations):
            start = time.perf_counter()
            r = torch.as_tensor(rot, dtype=torch.float32, device=self.device)
            points = [
                torch.cat([p[:k], p[k:] @ r.T], 0)
                for p, k in zip(batch.pyramid.points, n_ref, strict=True)
            ]
            pyramid = batch.pyramid._replace(points=points)
            preds += self._run(PairBatch(pyramid, batch.feats, 1), start, reference)
        return preds

    def collate(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> PairBatch:
        """``(src, ref)`` pairs voxelised and batched for this model, on its device.

        Raises:
            NonFiniteError: a cloud with NaN/Inf coordinates (the network would otherwise
                fail later with an unrelated message)."""
        from pcreg.errors import NonFiniteError

        for i, (s, r) in enumerate(pairs):
            for name, pts in (("src", s), ("ref", r)):
                if not np.isfinite(np.asarray(pts)).all():
                    raise NonFiniteError(f"{name} of pair {i}", "has NaN/Inf coordinates")
        return collate_pairs(
            [np.asarray(s, np.float32) for s, _ in pairs],
            [np.asarray(r, np.float32) for _, r in pairs],
            self.config,
            backend=self.backend,
        ).to(self.device)

    def _run(self, batch: PairBatch, start: float, reference=None) -> list[Prediction]:
        """Predictions of a collated batch; ``time_s`` counts from ``start``."""
        b = batch.batch_size
        out = self.model(batch.pyramid, batch.feats, b, reference=reference)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elapsed = time.perf_counter() - start
        f64 = lambda t: t.detach().cpu().double().numpy()  # noqa: E731
        return [
            Prediction(
                f64(out.transform[i]),
                f64(out.src_corr_points[i]),
                f64(out.ref_corr_points[i]),
                f64(out.corr_scores[i]),
                elapsed,
            )
            for i in range(b)
        ]


def save_model_checkpoint(
    path: str | os.PathLike[str], model: GeoTransformer, overwrite: bool = False, **extra: object
):
    """A loadable checkpoint: weights + the model configuration
    (:func:`pcreg.registration.loading.load_network` reads it)."""
    from pcreg.engine.checkpoint import save_checkpoint

    return save_checkpoint(
        path,
        "geotransformer",
        model.state_dict(),
        overwrite=overwrite,
        config=dataclasses.asdict(model.config),
        **extra,
    )
