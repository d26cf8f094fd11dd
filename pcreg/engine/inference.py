"""The one inference path: load a registration model, preprocess a pair, run, postprocess.

``api.register``, ``pcreg evaluate`` and odometry all go through :class:`Registrar`.

Orientation search (``config.orientation_search == "manhattan"``): each cloud is rotated into
its Manhattan frame (:mod:`pcreg.geometry.manhattan`), which leaves the pair one of the 24
rotations of a cube (plus a few degrees) apart. The network runs once per cube rotation of the
source and the hypothesis whose correspondences agree best with its own transform wins (the
confidence-weighted count within ``acceptance_radius``, the quantity the local-to-global
refinement already maximises). Only the right hypothesis leaves the network a small rotation.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from pcreg.data.collate import PairBatch, collate_pairs
from pcreg.engine.checkpoint import load_checkpoint, save_checkpoint
from pcreg.engine.heap import retain_freed_memory
from pcreg.engine.threads import single_threaded_blas
from pcreg.errors import CorruptFileError
from pcreg.geometry.cube_ranking import cube_hypothesis_scores
from pcreg.geometry.manhattan import CUBE_ROTATIONS, estimate_manhattan_frame
from pcreg.models.geotransformer import GeoTransformer, GeoTransformerConfig

if TYPE_CHECKING:
    from pcreg.engine.parallel import WorkerPool

__all__ = ["Prediction", "Registrar", "save_model_checkpoint"]

logger = logging.getLogger(__name__)


@dataclass
class Prediction:
    """``transform`` (4, 4) float64 ``T_ref_src``; dense correspondences ``(C, 3)`` float64 in
    the reference / source frames with confidences ``(C,)``; wall time in seconds."""

    transform: np.ndarray
    ref_corr_points: np.ndarray
    src_corr_points: np.ndarray
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

    def rotated(self, ref_rot: np.ndarray, src_rot: np.ndarray) -> Prediction:
        """This prediction for the pair ``(ref_rot @ ref, src_rot @ src)`` expressed for the
        original ``(ref, src)``: ``T <- ref_rot^T T src_rot`` and the points rotated back."""
        t = np.eye(4)
        t[:3, :3] = ref_rot.T @ self.transform[:3, :3] @ src_rot
        t[:3, 3] = ref_rot.T @ self.transform[:3, 3]
        return Prediction(
            t,
            self.ref_corr_points @ ref_rot,
            self.src_corr_points @ src_rot,
            self.corr_scores,
            self.time_s,
        )


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
        retain_freed_memory()  # process-wide; see pcreg.engine.heap (PCREG_RETAIN_HEAP=0: off)
        self.backend = neighbor_backend
        self._pool: WorkerPool | None = None  # batch(workers=...)'s processes, kept for reuse

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

    def batch(
        self, pairs: Sequence[tuple[np.ndarray, np.ndarray]], workers: int = 1
    ) -> list[Prediction]:
        """Register several ``(ref, src)`` pairs.

        ``workers == 1``: in this process, in one forward pass (one pyramid over all clouds;
        each prediction's ``time_s`` is the whole batch's wall time), or with the Manhattan
        orientation search pair by pair (``time_s``: that pair's search).

        ``workers > 1`` (CPU only): spread over that many worker processes of one torch thread
        each (:class:`~pcreg.engine.parallel.WorkerPool`; the throughput a CPU gets from a
        batch, since one registration does not keep two cores busy). The pool starts on first
        use with a snapshot of the model and is kept for later calls with the same number of
        workers and configuration; :meth:`close` stops it. ``time_s``: each pair's own time.
        The workers are ``spawn``ed, which re-imports the main module: a script that uses this
        must keep its top-level code under ``if __name__ == "__main__":`` (as for any
        ``multiprocessing`` pool).
        """
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if workers > 1 and len(pairs) > 1:
            if self.device.type != "cpu":
                raise ValueError(f"workers > 1 is for the CPU; this model is on {self.device}")
            return self._worker_pool(workers).map(pairs)
        if self.config.orientation_search == "manhattan":
            return [self.search(ref, src) for ref, src in pairs]
        return self.forward(pairs)

    def close(self) -> None:
        """Stop the worker processes of :meth:`batch` (if any)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _worker_pool(self, workers: int) -> WorkerPool:
        from pcreg.engine.parallel import WorkerPool

        pool = self._pool
        if pool is None or pool.workers != workers or pool.config != self.config:
            self.close()
            self._pool = pool = WorkerPool(self.model, workers, self.backend)
        return pool

    @single_threaded_blas
    def search(self, ref: np.ndarray, src: np.ndarray) -> Prediction:
        """Manhattan orientation search for one pair (see the module docstring). With
        ``config.orientation_keep > 0`` the 24 cube hypotheses are first ranked without the
        network (:func:`pcreg.geometry.cube_ranking.cube_hypothesis_scores`) and only those
        scoring at least ``orientation_keep`` x the best are run, best first."""
        start = time.perf_counter()
        cfg = self.config
        # the frame voxel of the training pairs' canonicalisation (canonicalize_pair)
        voxel = max(0.05, cfg.voxel_size)
        f_ref = estimate_manhattan_frame(ref, voxel=voxel)
        f_src = estimate_manhattan_frame(src, voxel=voxel)
        ref_rot, src_rot = f_ref.rotation, f_src.rotation
        ref_c = np.asarray(ref, np.float64) @ ref_rot.T
        src_c = np.asarray(src, np.float64) @ src_rot.T
        candidates = np.arange(len(CUBE_ROTATIONS))
        if cfg.orientation_keep > 0:
            rank = cube_hypothesis_scores(
                f_ref.points @ ref_rot.T,
                f_ref.normals @ ref_rot.T,
                f_src.points @ src_rot.T,
                f_src.normals @ src_rot.T,
                voxel=cfg.orientation_rank_voxel,
            )
            candidates = np.argsort(-rank, kind="stable")
            candidates = candidates[rank[candidates] >= cfg.orientation_keep * rank.max()]
        rotations = CUBE_ROTATIONS[candidates]
        preds = self.hypotheses(ref_c, src_c, rotations)
        scores = [p.consensus(cfg.acceptance_radius) for p in preds]
        best = int(np.argmax(scores))
        out = preds[best].rotated(ref_rot, rotations[best] @ src_rot)
        out.time_s = time.perf_counter() - start
        logger.debug(
            "orientation search: %d of 24 hypotheses run, cube rotation %d chosen",
            len(candidates),
            int(candidates[best]),
        )
        return out

    @torch.no_grad()
    @single_threaded_blas
    def hypotheses(
        self, ref: np.ndarray, src: np.ndarray, rotations: np.ndarray
    ) -> list[Prediction]:
        """The network on ``(ref, rot @ src)`` for every ``rot`` of ``rotations (H, 3, 3)``.

        The pair is voxelised and its neighbor pyramid built once: rotating a pyramid's
        points gives a valid pyramid of the rotated cloud (same neighbors, a rotated voxel
        grid), so each hypothesis costs only the network, and the reference's backbone
        features and both clouds' geometric embeddings are computed once
        (``GeoTransformer.forward``'s ``hypothesis_cache``). Input features must not change
        under rotation (ones, or FPFH with centroid-oriented normals)."""
        batch = self._collate([(ref, src)])
        n_ref = [int(n[0]) for n in batch.pyramid.lengths]
        cache: dict = {}
        preds = []
        for rot in np.asarray(rotations):
            r = torch.as_tensor(rot, dtype=torch.float32, device=self.device)
            points = [
                torch.cat([p[:k], p[k:] @ r.T], 0)
                for p, k in zip(batch.pyramid.points, n_ref, strict=True)
            ]
            pyramid = batch.pyramid._replace(points=points)
            preds += self._run(PairBatch(pyramid, batch.feats, 1), time.perf_counter(), cache)
        return preds

    @torch.no_grad()
    @single_threaded_blas
    def forward(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[Prediction]:
        """The network on ``(ref, src)`` pairs as given (no orientation search), in one
        batch."""
        if not pairs:
            return []
        start = time.perf_counter()
        return self._run(self._collate(pairs), start)

    def _collate(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> PairBatch:
        cfg = self.config
        return collate_pairs(
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

    def _run(
        self, batch: PairBatch, start: float, hypothesis_cache: dict | None = None
    ) -> list[Prediction]:
        """Predictions of a collated batch; ``time_s`` counts from ``start``."""
        b = batch.batch_size
        out = self.model(batch.pyramid, batch.feats, b, hypothesis_cache=hypothesis_cache)
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
            for i in range(b)
        ]
