"""Open3D ``core.nns`` (nanoflann KD-tree on CPU; Open3D's own kernels on its CUDA builds).

The open3d-cpu wheel has no CUDA: CUDA tensors are searched on the CPU and moved back.
Open3D returns squared distances computed by direct differences, so they are kept as they are.
"""

from __future__ import annotations

import importlib.util

import torch
from torch import Tensor

NAME = "open3d"

INSTALL_HINT = "pip install open3d-cpu (Linux x86_64) or open3d; Debian also needs libusb-1.0-0"


def is_available() -> bool:
    return importlib.util.find_spec("open3d") is not None


def _o3d():
    try:
        import open3d as o3d
    except ImportError as exc:
        raise ImportError(
            "the open3d neighbor backend needs open3d: pip install open3d-cpu (Linux x86_64) or "
            "open3d; on Debian it also needs the package libusb-1.0-0"
        ) from exc
    return o3d


def _tensor(x: Tensor):
    o3d = _o3d()
    return o3d.core.Tensor(x.detach().to("cpu").contiguous().numpy())


def knn(q: Tensor, s: Tensor, k: int) -> tuple[Tensor, Tensor | None, bool]:
    o3d = _o3d()
    nns = o3d.core.nns.NearestNeighborSearch(_tensor(s))
    nns.knn_index()
    idx, d2 = nns.knn_search(_tensor(q), min(k, s.shape[0]))
    return torch.from_numpy(idx.numpy()), torch.from_numpy(d2.numpy()), True


#: capped radius searches with at least this many queries check the density first (see radius)
DENSITY_CHECK_QUERIES = 20_000


def _dense(nns, q: Tensor, radius: float, k: int, samples: int = 64) -> bool:
    """Whether the radius holds, on average over ``samples`` evenly spaced queries, more than
    twice ``k`` points: then a plain kNN beats the radius-bounded search, whose cost grows with
    everything inside the radius. The count is extrapolated from the ``k``-th neighbor's
    distance as on a surface, ``k (radius / d_k)^2``; a mean, not a median, because a few dense
    regions (the ground next to a LiDAR) dominate the cost."""
    if q.shape[0] == 0:
        return False
    pick = torch.linspace(0, q.shape[0] - 1, min(samples, q.shape[0])).long()
    _, d2 = nns.knn_search(_tensor(q[pick]), k)
    kth = torch.from_numpy(d2.numpy())[:, -1].double().clamp(min=1e-12)
    return bool((radius**2 / kth).clamp(max=1e6).mean() > 2.0)


def radius(
    q: Tensor, s: Tensor, radius: float, cap: int | None
) -> tuple[Tensor, Tensor | None, bool]:
    o3d = _o3d()
    nns = o3d.core.nns.NearestNeighborSearch(_tensor(s))
    # Open3D's radius tests are strict (d < r); ours is inclusive. Search a hair wider and let
    # finalize apply the exact inclusive filter (anything it adds lies beyond every true
    # neighbor, so a capped search keeps the same nearest ones).
    radius = radius * (1.0 + 1e-6)
    if cap is not None:
        # The nearest `cap` points within the radius, then the inclusive filter in finalize.
        # Two ways, measured on this 2-core CPU: a plain kNN of `cap` (filtered afterwards) and
        # nanoflann's radius-bounded kNN (hybrid search), which prunes subtrees beyond the
        # radius but collects everything inside it. On voxelised clouds (the neighbor pyramid:
        # ~20-40 points within the radius) the hybrid search wins, 29 -> 14 ms for a 3DMatch
        # fragment's pyramid; on raw dense scans it loses, 0.38 -> 0.97 s for 100k KITTI points
        # at r = 0.5 m. So for large searches a small sample of queries decides which regime
        # this one is in (below DENSITY_CHECK_QUERIES the check would cost more than it saves:
        # 20k raw KITTI points at r = 0.5 m still favour the hybrid search, 0.038 vs 0.053 s).
        k = min(cap, s.shape[0])
        if q.shape[0] >= DENSITY_CHECK_QUERIES:
            nns.knn_index()
            if _dense(nns, q, radius, k):
                idx, d2 = nns.knn_search(_tensor(q), k)
                return torch.from_numpy(idx.numpy()), torch.from_numpy(d2.numpy()), True
        nns.hybrid_index(radius)
        idx, d2, _ = nns.hybrid_search(_tensor(q), radius, k)
        return torch.from_numpy(idx.numpy()), torch.from_numpy(d2.numpy()), True
    nns.fixed_radius_index(radius)
    flat_idx, flat_d2, splits = nns.fixed_radius_search(_tensor(q), radius, sort=True)
    flat_idx = torch.from_numpy(flat_idx.numpy()).long()
    flat_d2 = torch.from_numpy(flat_d2.numpy())
    splits = torch.from_numpy(splits.numpy()).long()
    counts = splits[1:] - splits[:-1]
    width = int(counts.max()) if counts.numel() else 0
    rows = torch.repeat_interleave(torch.arange(q.shape[0]), counts)
    cols = torch.arange(flat_idx.numel()) - torch.repeat_interleave(splits[:-1], counts)
    idx = torch.full((q.shape[0], width), -1, dtype=torch.long)
    d2 = torch.full((q.shape[0], width), float("inf"), dtype=flat_d2.dtype)
    idx[rows, cols] = flat_idx
    d2[rows, cols] = flat_d2
    return idx, d2, False
