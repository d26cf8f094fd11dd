"""Export a :class:`~pcreg.models.geotransformer.GeoTransformer`'s learned parts to ONNX graphs
that :mod:`pcreg.registration.onnx_network` runs without torch.

The network is cut where its work stops being dense tensor algebra:

* ``backbone``: one cloud's KPConv FPN, ``(feats, points_i, neighbors_i, subsampling_i,
  upsampling_i) -> (coarse, fine)`` features. Neighbor widths are fixed to the model's
  ``neighbor_limits`` (the caller pads with the shadow index).
* ``embedding``: the geometric structure embedding of one cloud's superpoints,
  ``(1, M, 3) -> (1, M, M, hidden)``.
* ``transformer``: the geometric transformer on one pair from its embeddings, with the
  L2-normalised output features of :meth:`GeoTransformer.coarse_matching`.
* ``sinkhorn_scaling`` / ``sinkhorn_log``: the learnable optimal transport on ``(P, K, K)`` patch
  scores, one graph per solver (the choice depends on the scores' spread, made by the caller as
  :class:`LearnableLogOptimalTransport` makes it).

Superpoint matching, the partition into patches, dense correspondences and the local-to-global
estimate are data-dependent selections, not learned: numpy does them (:mod:`pcreg.runtime`).

Tracing runs each graph once on example inputs, so every Python-level choice must be one that
holds for all inputs: the group norm runs over one cloud (no per-item split), the embedding in
one block of rows, the angle embedding with ``angle_k`` neighbours (clouds of at least
``angle_k + 1`` superpoints).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import types
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from pcreg.layers import MultiHeadAttention
from pcreg.models.backbones.kpconv.blocks import PackedGroupNorm
from pcreg.models.geotransformer import GeoTransformer
from pcreg.models.geotransformer.optimal_transport import log_sinkhorn, scaling_sinkhorn
from pcreg.ops.pyramid import Pyramid

__all__ = ["GRAPHS", "OPSET", "export_graphs", "optimise_graphs"]

logger = logging.getLogger(__name__)

#: ONNX opset of the exported graphs (onnxruntime >= 1.17 runs it)
OPSET = 17
#: the graphs one export writes, in order
GRAPHS = ("backbone", "embedding", "transformer", "sinkhorn_scaling", "sinkhorn_log")


def _single_item_group_norm(self: PackedGroupNorm, x: Tensor, lengths: Tensor) -> Tensor:
    """PackedGroupNorm over one item: the same statistics, from tensor shapes rather than the
    Python list of lengths (which tracing would bake in as constants)."""
    c = x.shape[1]
    g = self.num_groups
    cg = c // g
    mean = x.mean(0).view(g, cg).mean(1).repeat_interleave(cg)
    centred = x - mean
    var = centred.square().mean(0).view(g, cg).mean(1)
    scale = torch.rsqrt(var + self.eps).repeat_interleave(cg) * self.weight
    return torch.addcmul(self.bias, centred, scale)


@contextlib.contextmanager
def _traceable(model: GeoTransformer) -> Iterator[None]:
    """Switch the model's parts to their single-item, single-block forms while tracing. Only
    this model's own modules change (instance attributes): a registration running the class
    elsewhere in the process meanwhile (``pcreg serve``'s other models) is untouched."""
    emb = model.transformer.embedding
    row_block = emb.row_block
    attention = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    fused = [m.fused for m in attention]
    norms = [m for m in model.modules() if isinstance(m, PackedGroupNorm)]
    for m in norms:  # an instance's forward shadows the class's
        m.forward = types.MethodType(_single_item_group_norm, m)  # type: ignore[method-assign]
    emb.row_block = 1 << 30
    for m in attention:  # the math path: the fused kernel's export dropped the bias (measured)
        m.fused = False
    try:
        yield
    finally:
        for m in norms:
            del m.forward
        emb.row_block = row_block
        for m, f in zip(attention, fused, strict=True):
            m.fused = f


class _Backbone(nn.Module):
    def __init__(self, model: GeoTransformer) -> None:
        super().__init__()
        self.backbone = model.backbone
        self.stages = model.config.num_stages

    def forward(self, feats: Tensor, *tensors: Tensor) -> tuple[Tensor, Tensor]:
        s = self.stages
        points = list(tensors[:s])
        neighbors = list(tensors[s : 2 * s])
        subsampling = list(tensors[2 * s : 3 * s - 1])
        upsampling = list(tensors[3 * s - 1 : 4 * s - 2])
        frames = None
        if self.backbone.rotation_invariant:  # the frames come in (ONNX has no eigh)
            rest = tensors[4 * s - 2 :]
            frames = (list(rest[:s]), list(rest[s:]))
        lengths = [torch.ones(1, dtype=torch.long) for _ in range(s)]  # unused when traced
        pyramid = Pyramid(points, lengths, neighbors, subsampling, upsampling)
        return self.backbone(feats, pyramid, frames)


class _Embedding(nn.Module):
    def __init__(self, model: GeoTransformer) -> None:
        super().__init__()
        self.embedding = model.transformer.embedding

    def forward(self, points: Tensor) -> Tensor:
        return self.embedding(points, None)


class _Transformer(nn.Module):
    def __init__(self, model: GeoTransformer) -> None:
        super().__init__()
        self.transformer = model.transformer

    def forward(
        self, src_feats: Tensor, ref_feats: Tensor, src_emb: Tensor, ref_emb: Tensor
    ) -> tuple[Tensor, Tensor]:
        src_valid = torch.ones(src_feats.shape[:2], dtype=torch.bool)
        ref_valid = torch.ones(ref_feats.shape[:2], dtype=torch.bool)
        src, ref = self.transformer(
            None, None, src_feats, ref_feats, src_valid, ref_valid, (src_emb, ref_emb)
        )
        return nn.functional.normalize(src, dim=-1), nn.functional.normalize(ref, dim=-1)


class _Sinkhorn(nn.Module):
    """The solver part of :class:`LearnableLogOptimalTransport` after its padding: inputs are
    the padded scores and the marginals, so the graph holds only the iterations."""

    def __init__(self, iterations: int, scaling: bool) -> None:
        super().__init__()
        self.iterations = iterations
        self.solve = scaling_sinkhorn if scaling else log_sinkhorn

    def forward(self, padded: Tensor, log_mu: Tensor, log_nu: Tensor) -> Tensor:
        return self.solve(padded, log_mu, log_nu, self.iterations)


_TRACE_NODES = 40  # superpoints in the example of the embedding's and transformer's traces


def _example_pyramid(model: GeoTransformer, seed: int = 0) -> tuple[list[Tensor], Pyramid]:
    """A real pyramid of a random cloud big enough for every stage (the tracing example)."""
    from pcreg.data.collate import collate_pairs

    cfg = model.config
    rng = np.random.default_rng(seed)
    extent = cfg.voxel_size * 2 ** (cfg.num_stages + 2)
    cloud = (rng.random((6000, 3)) * extent).astype(np.float32)
    batch = collate_pairs([cloud], [cloud], cfg)
    from pcreg.ops.pyramid import pyramid_items

    one = pyramid_items(batch.pyramid, 0, 1)
    feats = batch.feats[: int(one.lengths[0].sum())]
    return [feats], one


def _export(module: nn.Module, args: tuple, path: Path, names, outputs, dynamic) -> None:
    buffer = io.BytesIO()
    torch.onnx.export(
        module,
        args,
        buffer,
        input_names=list(names),
        output_names=list(outputs),
        dynamic_axes=dynamic,
        opset_version=OPSET,
        dynamo=False,
        do_constant_folding=True,
    )
    path.write_bytes(buffer.getvalue())


def export_graphs(model: GeoTransformer, folder: str | os.PathLike[str]) -> dict[str, str]:
    """Write the ONNX graphs of ``model`` (eval mode, float32) into ``folder``.

    Returns ``{graph name: file name}``. The files are written under temporary names and
    renamed once all are written (a reader never sees half an export)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = model.float().eval()
    cfg = model.config
    s = cfg.num_stages
    files = {name: f"{name}.onnx" for name in GRAPHS}
    tmp = {name: folder / f".{name}.onnx.{os.getpid()}.tmp" for name in GRAPHS}
    try:
        with torch.no_grad(), _traceable(model), warnings.catch_warnings():
            # the tracer warns at every Python-level choice; the module docstring says why
            # each one holds for all inputs
            warnings.simplefilter("ignore")
            [feats], pyr = _example_pyramid(model)
            pad = _pad_pyramid(pyr, cfg.neighbor_limits)
            tensors = [*pad.points, *pad.neighbors, *pad.subsampling, *pad.upsampling]
            names = (
                ["feats"]
                + [f"points_{i}" for i in range(s)]
                + [f"neighbors_{i}" for i in range(s)]
                + [f"subsampling_{i}" for i in range(s - 1)]
                + [f"upsampling_{i}" for i in range(s - 1)]
            )
            if model.backbone.rotation_invariant:
                frames, strided = model.backbone.reference_frames(pad)
                tensors += [*frames, *strided]
                names += [f"frames_{i}" for i in range(s)]
                names += [f"strided_frames_{i}" for i in range(1, s)]
            dyn = {"feats": {0: "n0"}, "coarse": {0: f"n{s - 1}"}, "fine": {0: "n1"}}
            for i in range(s):
                dyn[f"frames_{i}"] = {0: f"n{i}"}
            for i in range(1, s):
                dyn[f"strided_frames_{i}"] = {0: f"n{i}"}
            for i in range(s):
                dyn[f"points_{i}"] = {0: f"n{i}"}
                dyn[f"neighbors_{i}"] = {0: f"n{i}"}
            for i in range(s - 1):
                dyn[f"subsampling_{i}"] = {0: f"n{i + 1}"}
                dyn[f"upsampling_{i}"] = {0: f"n{i}"}
            _export(_Backbone(model), (feats, *tensors), tmp["backbone"], names,
                    ["coarse", "fine"], dyn)  # fmt: skip
            coarse, _ = model.backbone(feats, pyr)
            # the attention graphs are traced on a few of the nodes (their axes are dynamic):
            # the embedding's pairwise terms on all of them made its trace 3-7 s of the
            # export's 20 s per network
            nodes = pad.points[-1][None, :_TRACE_NODES]
            _export(_Embedding(model), (nodes,), tmp["embedding"], ["points"], ["embedding"],
                    {"points": {1: "m"}, "embedding": {1: "m", 2: "m"}})  # fmt: skip
            emb = model.transformer.embedding(nodes, None)
            feats_c = coarse[None, :_TRACE_NODES]
            _export(_Transformer(model), (feats_c, feats_c, emb, emb), tmp["transformer"],
                    ["src_feats", "ref_feats", "src_embedding", "ref_embedding"],
                    ["src", "ref"],
                    {"src_feats": {1: "m"}, "ref_feats": {1: "n"},
                     "src_embedding": {1: "m", 2: "m"}, "ref_embedding": {1: "n", 2: "n"},
                     "src": {1: "m"}, "ref": {1: "n"}})  # fmt: skip
            k = cfg.num_points_in_patch + 1
            padded = torch.randn(4, k, k)
            log_mu = torch.full((4, k), -float(np.log(2 * k)))
            iters = model.matcher.optimal_transport.num_iterations
            for name, scaling in (("sinkhorn_scaling", True), ("sinkhorn_log", False)):
                _export(_Sinkhorn(iters, scaling), (padded, log_mu, log_mu.clone()), tmp[name],
                        ["padded", "log_mu", "log_nu"], ["log_assign"],
                        {"padded": {0: "p"}, "log_mu": {0: "p"}, "log_nu": {0: "p"},
                         "log_assign": {0: "p"}})  # fmt: skip
        for name in GRAPHS:
            os.replace(tmp[name], folder / files[name])
    finally:
        for path in tmp.values():
            path.unlink(missing_ok=True)
    return files


def _pad_pyramid(pyr: Pyramid, limits) -> Pyramid:
    """Index tensors padded (shadow) or cut to the model's fixed widths: neighbors and
    subsampling of stage i to ``limits[i]``, upsampling of stage i to ``limits[i + 1]``."""

    def fit(t: Tensor, width: int, shadow: int) -> Tensor:
        if t.shape[1] >= width:
            return t[:, :width].contiguous()
        return torch.cat([t, t.new_full((t.shape[0], width - t.shape[1]), shadow)], 1)

    n = [p.shape[0] for p in pyr.points]
    return Pyramid(
        pyr.points,
        pyr.lengths,
        [fit(t, limits[i], n[i]) for i, t in enumerate(pyr.neighbors)],
        [fit(t, limits[i], n[i]) for i, t in enumerate(pyr.subsampling)],
        [fit(t, limits[i + 1], n[i + 1]) for i, t in enumerate(pyr.upsampling)],
    )


def optimise_graphs(folder: str | os.PathLike[str], graphs: dict[str, str]) -> dict[str, str]:
    """Replace each graph of ``folder`` by ONNX Runtime's extended optimisation of it (fused
    matrix products, folded constants; the basic and extended levels are portable between
    machines, the layout level is not), so that sessions open without optimising:
    :class:`~pcreg.registration.onnx_network.OnnxRegistrar`. Returns the new file names."""
    import onnxruntime as ort

    folder = Path(folder)
    out = {}
    for name, file in graphs.items():
        target = f"{name}.opt.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(folder / target)
        options.log_severity_level = 3
        ort.InferenceSession(str(folder / file), options, providers=["CPUExecutionProvider"])
        (folder / file).unlink()
        out[name] = target
    return out
