"""The registration network on ONNX Runtime: the same predictions as
:class:`pcreg.registration.network.Registrar`, without torch.

One pair runs as :meth:`GeoTransformer.forward` runs it for a batch of one: the neighbor
pyramid of each cloud (:mod:`pcreg.runtime.pyramid`), the KPConv backbone, the geometric
structure embeddings and the transformer (ONNX graphs from :mod:`pcreg.registration.onnx_export`),
superpoint matching and the patches (numpy), the optimal transport (an ONNX graph), dense
correspondences and local-to-global registration (numpy, :mod:`pcreg.runtime.lgr`).
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

import numpy as np

from pcreg.engine.threads import single_threaded_blas
from pcreg.models.geotransformer.config import GeoTransformerConfig
from pcreg.registration.prediction import Prediction
from pcreg.runtime.frames import local_reference_frames
from pcreg.runtime.lgr import local_to_global_registration
from pcreg.runtime.matching import correspondences, gather_patches, superpoint_matching
from pcreg.runtime.partition import patch_points, point_to_node_partition
from pcreg.runtime.pyramid import CloudPyramid, voxelise_and_build

__all__ = ["OnnxRegistrar"]

T = TypeVar("T")
U = TypeVar("U")

# LearnableLogOptimalTransport's constants (pcreg.models.geotransformer.optimal_transport)
_NEG = np.float32(-1e12)
_SCALING_MAX_SPREAD = 40.0


@dataclass
class _Encoded:
    """One cloud through the backbone: its pyramid, coarse ``(S, Cc)`` and fine ``(N1, Cf)``
    features (float32)."""

    pyramid: CloudPyramid
    coarse: np.ndarray
    fine: np.ndarray


class _Sessions(dict):
    """Graph name -> ONNX Runtime session, each made on first use (the log-domain Sinkhorn is
    rarely needed). The graphs were optimised when exported
    (:func:`~pcreg.registration.onnx_export.optimise_graphs`), so the sessions skip
    ONNX Runtime's own pass: 0.12 s instead of 0.23 s to open the indoor network's graphs
    (2-core AMD EPYC)."""

    def __init__(self, graphs: dict[str, str | Path | bytes], threads: int) -> None:
        super().__init__()
        self.graphs = graphs
        self.threads = threads
        self._lock = threading.Lock()

    def __missing__(self, name: str):
        with self._lock:  # two lanes may ask for the same graph first
            if name in self:
                return dict.__getitem__(self, name)
            return self._open(name)

    def _open(self, name: str):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        # no memory arena: it keeps every peak it has seen (one process registering 3DMatch and
        # KITTI pairs in turn held 1.1 GiB against 0.56 GiB without it, at the same speed:
        # 0.26 / 1.12 s against 0.27 / 1.11 s per pair, 2-core AMD EPYC)
        options.enable_cpu_mem_arena = False
        graph = self.graphs[name]
        session = ort.InferenceSession(
            graph if isinstance(graph, bytes) else str(graph),
            options,
            providers=["CPUExecutionProvider"],
        )
        self[name] = session
        return session


class OnnxRegistrar:
    """A shipped network's exported graphs, called like a ``Registrar`` on ``(src, ref)``
    pairs of ``(N, 3)`` arrays in metres.

    Args:
        manifest: the export's ``manifest.json`` (:mod:`pcreg.registration.onnx_loading`):
            ``config`` (the architecture, a dict of :class:`GeoTransformerConfig` fields), ``alpha``
            (the optimal transport's learned dustbin score).
        graphs: graph name -> its file, or its serialised bytes (a Ray worker's copy).
        torch_model: builds the torch module of the same weights, for :attr:`model`.
        threads: ONNX Runtime intra-op threads (1: the search runs its hypotheses one after
            another, and a busy machine's neighbours keep their cores).
    """

    device = "cpu"
    backend = "numpy"

    def __init__(
        self,
        manifest: dict,
        graphs: dict[str, str | Path | bytes],
        threads: int = 1,
        torch_model: Callable[[], object] | None = None,
    ) -> None:
        self.manifest = manifest
        self._model = None
        self._torch_model = torch_model
        fields = {f.name for f in dataclasses.fields(GeoTransformerConfig)}
        self.config = GeoTransformerConfig(**{
            k: tuple(v) if isinstance(v, list) else v
            for k, v in manifest["config"].items() if k in fields
        })  # fmt: skip
        self.alpha = np.float32(manifest["alpha"])
        self.graphs = _Sessions(graphs, threads)

    @property
    def model(self):
        """The torch :class:`~pcreg.models.geotransformer.GeoTransformer` of the same shipped
        weights, loaded (with torch) on first access: for code that reaches into the network
        itself; registering never needs it."""
        if self._model is None:
            if self._torch_model is None:
                raise AttributeError("this ONNX Runtime network was built without its torch twin")
            self._model = self._torch_model()
        return self._model

    # -- the Registrar interface -----------------------------------------------------------

    def __call__(self, src: np.ndarray, ref: np.ndarray) -> Prediction:
        """The network on one pair as given: ``src (N, 3)``, ``ref (M, 3)`` in metres."""
        return self.forward([(src, ref)])[0]

    @single_threaded_blas
    def forward(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[Prediction]:
        """The network on each ``(src, ref)`` pair as given (one after another; each
        prediction's ``time_s`` is its own wall time)."""
        out = []
        with _Lanes() as lanes:
            for src, ref in pairs:
                start = time.perf_counter()
                (s, s_emb), (r, r_emb) = self._encoded(src, ref, lanes)
                out.append(self._predict(s, r, s_emb, r_emb, start))
        return out

    @single_threaded_blas
    def keeping(
        self, src: np.ndarray, ref: np.ndarray
    ) -> tuple[Prediction, Callable[[np.ndarray], Prediction]]:
        """The network on one pair as given (as :meth:`__call__`, and as fast), and a
        function that runs it on the source turned by ``rot (3, 3)``, proper or improper,
        on what this pass computed: the pyramids, the reference's features and both
        embeddings; only the turned source's backbone and the matching run again (the
        mirror check's image of a LiDAR scan: :mod:`pcreg.registration.mirror`). Its
        prediction is for the turned source."""
        start = time.perf_counter()
        with _Lanes() as lanes:
            (s, s_emb), (r, r_emb) = self._encoded(src, ref, lanes)
            pred = self._predict(s, r, s_emb, r_emb, start)
        s_pyr = s.pyramid

        @single_threaded_blas
        def turned(rot: np.ndarray) -> Prediction:
            began = time.perf_counter()
            r32 = np.asarray(rot, np.float32)
            moved = s_pyr._replace(points=[p @ r32.T for p in s_pyr.points])
            return self._predict(self._backbone(moved), r, s_emb, r_emb, began)

        return pred, turned

    def hypotheses(
        self, src: np.ndarray, ref: np.ndarray, rotations: np.ndarray
    ) -> list[Prediction]:
        """The network on ``(rot @ src, ref)`` for every ``rot`` of ``rotations (H, 3, 3)``;
        each prediction is for the rotated source. The pyramids, the reference's features and
        both embeddings (invariant to a rotation of the source) are computed once, as
        :meth:`Registrar.hypotheses` does. With two lanes the two clouds' steps, then
        the hypotheses, run two at a time (:class:`_Lanes`)."""
        return self.prepare(src, ref)(rotations)

    @single_threaded_blas
    def prepare(self, src: np.ndarray, ref: np.ndarray) -> Callable[[np.ndarray], list[Prediction]]:
        """What :meth:`hypotheses` computes once for a pair (the pyramids, the reference's
        features, both embeddings), and a function that runs the hypotheses
        ``rotations (H, 3, 3)`` on it, as often as asked. A rotation may be improper (a
        reflection): a reflected pyramid is the pyramid of the reflected cloud, and the
        embeddings (distances and angles) do not change either, so the mirror image of the
        source costs one hypothesis (:mod:`pcreg.registration.mirror`)."""
        with _Lanes() as lanes:
            src_pyr, ref_pyr = self._pyramids(src, ref, lanes)
            ref_enc, src_emb = lanes.both(
                lambda: self._backbone(ref_pyr),
                partial(self._embed, src_pyr.points[-1]),
            )
            ref_emb = self._embedding(ref_enc)

        def one(rot: np.ndarray) -> Prediction:
            start = time.perf_counter()
            r32 = np.asarray(rot, np.float32)
            turned = src_pyr._replace(points=[p @ r32.T for p in src_pyr.points])
            return self._predict(self._backbone(turned), ref_enc, src_emb, ref_emb, start)

        @single_threaded_blas
        def run(rotations: np.ndarray) -> list[Prediction]:
            with _Lanes() as lanes:
                return lanes.map(one, list(np.asarray(rotations)))

        return run

    # -- the steps -----------------------------------------------------------------------

    def _encoded(
        self, src: np.ndarray, ref: np.ndarray, lanes: _Lanes
    ) -> tuple[tuple[_Encoded, np.ndarray], tuple[_Encoded, np.ndarray]]:
        """Each cloud through its pyramid, the backbone and the geometric structure embedding:
        ``(encoded, embedding)`` of the source, then of the reference, the two clouds side by
        side on the lanes. The reference's are kept for the rest of the registration
        (:mod:`pcreg.registration.memo`, by its content; one reference per network): ``auto``
        runs the network again with the same reference, from FPFH + RANSAC's pose and for the
        mirror check, and then only the source's half runs (on a KITTI scan cut to 400
        superpoint cells its pyramid, backbone and embedding take about 0.6 s of one
        core)."""
        from pcreg.registration.memo import content_key, forget, keep, recalled

        slot, key = ("onnx reference", id(self)), content_key(np.asarray(ref, np.float32))
        known = recalled(slot, holds=self)
        if known is not None and known[0] == key:
            (s_pyr,) = self._pyramids_of([("src", src)], lanes)
            s = self._backbone(s_pyr)
            return (s, self._embedding(s)), known[1]
        forget(slot)  # another reference: the last one's encoding goes first
        s_pyr, r_pyr = self._pyramids(src, ref, lanes)
        s, r = lanes.both(partial(self._backbone, s_pyr), partial(self._backbone, r_pyr))
        s_emb, r_emb = lanes.both(partial(self._embedding, s), partial(self._embedding, r))
        keep(slot, (key, (r, r_emb)), holds=self)
        return (s, s_emb), (r, r_emb)

    def knows(self, ref: np.ndarray) -> bool:
        """Whether a pass with ``ref (M, 3)`` as its reference would run only the source's
        half: this registration already ran the reference's (:meth:`_encoded`)."""
        from pcreg.registration.memo import content_key, recalled

        known = recalled(("onnx reference", id(self)), holds=self)
        return known is not None and known[0] == content_key(np.asarray(ref, np.float32))

    def _pyramids(
        self, src: np.ndarray, ref: np.ndarray, lanes: _Lanes
    ) -> tuple[CloudPyramid, CloudPyramid]:
        first, second = self._pyramids_of([("src", src), ("ref", ref)], lanes)
        return first, second

    def _pyramids_of(
        self, clouds: list[tuple[str, np.ndarray]], lanes: _Lanes
    ) -> list[CloudPyramid]:
        """The pyramid of each ``(name, points)``, on the lanes; a cloud with NaN/Inf
        coordinates raises :class:`~pcreg.errors.NonFiniteError` naming it."""
        from pcreg.errors import NonFiniteError

        for name, pts in clouds:
            if not np.isfinite(np.asarray(pts)).all():
                raise NonFiniteError(f"{name} of pair 0", "has NaN/Inf coordinates")
        cfg = self.config

        def build(points: np.ndarray) -> Callable[[], CloudPyramid]:
            cloud = np.asarray(points, np.float32)
            return lambda: voxelise_and_build(cloud, cfg, nearest_upsampling=True)

        return lanes.map(lambda f: f(), [build(pts) for _, pts in clouds])

    def _run(self, graph: str, **feed: np.ndarray) -> list[np.ndarray]:
        """Run ``graph`` on the inputs it takes. Only ``upsampling_0`` may go unused (the FPN
        decodes down to stage 1, never to 0); any other unused input means the export folded
        it into a constant, and the graph would answer for the example it was traced on."""
        session = self.graphs[graph]
        want = {i.name for i in session.get_inputs()}
        unused = set(feed) - want - {"upsampling_0"}
        if unused:
            raise RuntimeError(f"the {graph} graph does not take {sorted(unused)}: re-export it "
                               "(python tools/export_onnx.py --force)")  # fmt: skip
        return session.run(None, {k: v for k, v in feed.items() if k in want})

    def _backbone(self, pyr: CloudPyramid) -> _Encoded:
        limits = self.config.neighbor_limits
        feed = {"feats": np.ones((len(pyr.points[0]), 1), np.float32)}
        n = [len(p) for p in pyr.points]
        for i, p in enumerate(pyr.points):
            feed[f"points_{i}"] = np.ascontiguousarray(p, np.float32)
            feed[f"neighbors_{i}"] = _fit(pyr.neighbors[i], limits[i], n[i])
        for i in range(len(pyr.points) - 1):
            feed[f"subsampling_{i}"] = _fit(pyr.subsampling[i], limits[i], n[i])
            feed[f"upsampling_{i}"] = _fit(pyr.upsampling[i], limits[i + 1], n[i + 1])
        if self.config.rotation_invariant:
            radii = [self.config.init_radius * self.config.voxel_size * 2**i for i in range(len(n))]
            for i, p in enumerate(pyr.points):
                feed[f"frames_{i}"] = local_reference_frames(
                    p, p, feed[f"neighbors_{i}"], radii[i]
                ).astype(np.float32)
            for i in range(1, len(n)):
                feed[f"strided_frames_{i}"] = local_reference_frames(
                    pyr.points[i], pyr.points[i - 1], feed[f"subsampling_{i - 1}"], radii[i - 1]
                ).astype(np.float32)
        coarse, fine = self._run("backbone", **feed)
        return _Encoded(pyr, coarse, fine)

    def _embedding(self, enc: _Encoded) -> np.ndarray:
        return self._embed(enc.pyramid.points[-1])

    def _embed(self, nodes: np.ndarray) -> np.ndarray:
        """``(1, M, M, hidden)`` geometric structure embedding of superpoints ``(M, 3)``.

        Raises:
            InputError: ``angle_k`` superpoints or fewer: the graph was traced with ``angle_k``
                angle neighbours, which such a cloud does not have (the torch network uses
                fewer; the pipeline refuses clouds of under 16 superpoints before this)."""
        if len(nodes) <= self.config.angle_k:
            from pcreg.errors import InputError

            raise InputError(
                "cloud", f"has {len(nodes)} superpoints; the network needs more than "
                f"{self.config.angle_k}"
            )  # fmt: skip
        return self._run("embedding", points=nodes[None])[0]

    def _transformer(
        self, src: _Encoded, ref: _Encoded, src_emb: np.ndarray, ref_emb: np.ndarray
    ) -> list[np.ndarray]:
        """L2-normalised superpoint features ``(1, M, C)``, ``(1, N, C)``."""
        return self._run(
            "transformer",
            src_feats=src.coarse[None],
            ref_feats=ref.coarse[None],
            src_embedding=src_emb,
            ref_embedding=ref_emb,
        )

    def _predict(
        self,
        src: _Encoded,
        ref: _Encoded,
        src_emb: np.ndarray,
        ref_emb: np.ndarray,
        start: float,
    ) -> Prediction:
        cfg = self.config
        src_c, ref_c = self._transformer(src, ref, src_emb, ref_emb)
        k = cfg.num_points_in_patch
        src_fine_pts, ref_fine_pts = src.pyramid.points[1], ref.pyramid.points[1]
        src_valid_n, src_idx, src_kv = point_to_node_partition(
            src_fine_pts, src.pyramid.points[-1], k
        )
        ref_valid_n, ref_idx, ref_kv = point_to_node_partition(
            ref_fine_pts, ref.pyramid.points[-1], k
        )
        si, ri, _ = superpoint_matching(
            src_c[0], ref_c[0], src_valid_n, ref_valid_n, cfg.num_correspondences,
            cfg.dual_normalization,
        )  # fmt: skip
        patches = gather_patches(
            si, ri,
            src_knn_indices=src_idx, src_knn_points=patch_points(src_fine_pts, src_idx),
            src_knn_valid=src_kv, src_fine=src.fine,
            ref_knn_indices=ref_idx, ref_knn_points=patch_points(ref_fine_pts, ref_idx),
            ref_knn_valid=ref_kv, ref_fine=ref.fine,
        )  # fmt: skip
        log_assign = self._assignment(patches.ref_feats, patches.src_feats,
                                      patches.ref_valid, patches.src_valid)  # fmt: skip
        s_pts, r_pts, scores, patch = correspondences(
            log_assign, patches, cfg.topk, cfg.confidence_threshold, cfg.mutual
        )
        transform, _ = local_to_global_registration(
            s_pts, r_pts, scores, patch, cfg.acceptance_radius, cfg.min_correspondences,
            cfg.refinement_steps,
        )  # fmt: skip
        return Prediction(
            np.asarray(transform, np.float64),
            np.asarray(s_pts, np.float64),
            np.asarray(r_pts, np.float64),
            np.asarray(scores, np.float64),
            time.perf_counter() - start,
        )

    def _assignment(
        self, ref_feats: np.ndarray, src_feats: np.ndarray, ref_valid: np.ndarray,
        src_valid: np.ndarray,
    ) -> np.ndarray:  # fmt: skip
        """``(P, R + 1, C + 1)`` log assignment: the scores and the dustbin padding as
        :class:`LearnableLogOptimalTransport` builds them, the iterations in an ONNX graph."""
        p, r, c = ref_feats.shape[0], ref_feats.shape[1], src_feats.shape[1]
        width = ref_feats.shape[-1]
        scores = np.matmul(ref_feats, src_feats.transpose(0, 2, 1)) / np.float32(math.sqrt(width))
        alpha = self.alpha
        padded = np.full((p, r + 1, c + 1), alpha, np.float32)
        padded[:, :r, :c] = scores
        rows = np.concatenate([ref_valid, np.ones((p, 1), bool)], 1)
        cols = np.concatenate([src_valid, np.ones((p, 1), bool)], 1)
        pad_pair = ~(rows[:, :, None] & cols[:, None, :])
        pad_pair[:, :r, c] &= ref_valid
        pad_pair[:, r, :c] &= src_valid
        padded[pad_pair] = _NEG
        n_rows = ref_valid.sum(1).astype(np.float32)
        n_cols = src_valid.sum(1).astype(np.float32)
        norm = -np.log(np.maximum(n_rows + n_cols, 1)).astype(np.float32)
        log_cols = np.where(n_cols > 0, np.log(np.maximum(n_cols, 1)), _NEG).astype(np.float32)
        log_rows = np.where(n_rows > 0, np.log(np.maximum(n_rows, 1)), _NEG).astype(np.float32)
        log_mu = np.concatenate([np.repeat(norm[:, None], r, 1), (log_cols + norm)[:, None]], 1)
        log_nu = np.concatenate([np.repeat(norm[:, None], c, 1), (log_rows + norm)[:, None]], 1)
        log_mu[~rows] = _NEG
        log_nu[~cols] = _NEG
        finite = padded > _NEG / 2
        hi = np.where(finite, padded, -np.inf).max(axis=(1, 2))
        lo = np.where(finite, padded, np.inf).min(axis=(1, 2))
        graph = "sinkhorn_scaling" if (hi - lo).max() < _SCALING_MAX_SPREAD else "sinkhorn_log"
        (out,) = self._run(graph, padded=padded, log_mu=log_mu.astype(np.float32),
                           log_nu=log_nu.astype(np.float32))  # fmt: skip
        return out - norm[:, None, None]


class _Lanes:
    """Two lanes of work when the registration may run two
    (:func:`pcreg.engine.threads.current_lanes`: its ceiling, busy neighbours or not), else
    one: ONNX Runtime's sessions, numpy's array loops and the k-d trees release the GIL, so
    the two clouds' pyramids and backbones, and then the orientation search's hypotheses,
    overlap on two cores. The sessions themselves stay at one thread (their own pool's
    threads spin at every operator's barrier, which a busy neighbour turns into waits)."""

    def __init__(self) -> None:
        from pcreg.engine.threads import current_lanes

        self.pool = ThreadPoolExecutor(2) if current_lanes() >= 2 else None

    def __enter__(self) -> _Lanes:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def both(self, first: Callable[[], T], second: Callable[[], U]) -> tuple[T, U]:
        if self.pool is None:
            return first(), second()
        later = self.pool.submit(second)
        return first(), later.result()

    def map(self, func: Callable[[T], U], items: list[T]) -> list[U]:
        if self.pool is None or len(items) < 2:
            return [func(x) for x in items]
        return list(self.pool.map(func, items))


def _fit(indices: np.ndarray, width: int, shadow: int) -> np.ndarray:
    """Neighbor indices ``(N, K)`` at exactly ``width`` columns (extra columns: the shadow
    index), int64 as the graphs take them."""
    indices = np.asarray(indices, np.int64)
    if indices.shape[1] >= width:
        return np.ascontiguousarray(indices[:, :width])
    pad = np.full((indices.shape[0], width - indices.shape[1]), shadow, np.int64)
    return np.concatenate([indices, pad], 1)
