"""The numpy local reference frames (:mod:`pcreg.runtime.frames`), which the CPU torch path
also uses, equal the torch formulation (kept for GPUs) where the frames are well defined."""

from __future__ import annotations

import numpy as np
import torch

from pcreg.models.backbones.kpconv.frames import _frames_torch, local_reference_frames
from pcreg.runtime.frames import local_reference_frames as frames_numpy


def _cloud(seed: int = 0, n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    pts = rng.normal(size=(n, 3)) * [1.0, 0.6, 0.3]  # anisotropic: distinct eigenvalues
    d = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    idx = np.argsort(d, 1)[:, :24]
    idx[:5, 12:] = n  # some padded (shadow) neighbours
    return pts, idx


def test_numpy_frames_equal_the_torch_formulation():
    pts, idx = _cloud()
    ours = frames_numpy(pts, pts, idx, 2.0)
    ref = _frames_torch(torch.from_numpy(pts), torch.from_numpy(pts), torch.from_numpy(idx), 2.0)
    np.testing.assert_allclose(ours, ref.numpy(), atol=1e-9)
    assert ours.dtype == np.float64
    # orthonormal, right-handed
    np.testing.assert_allclose(np.linalg.det(ours), 1.0, atol=1e-12)


def test_torch_path_on_the_cpu_uses_the_numpy_frames():
    pts, idx = _cloud(1)
    t = torch.from_numpy(pts).float()
    got = local_reference_frames(t, t, torch.from_numpy(idx), 2.0)
    assert got.dtype == torch.float32
    np.testing.assert_array_equal(
        got.numpy(),
        frames_numpy(pts.astype(np.float32), pts.astype(np.float32), idx, 2.0).astype(np.float32),
    )


def test_a_query_without_neighbours_gets_the_identity():
    pts, _ = _cloud(2, 50)
    out = frames_numpy(pts[:2], pts, np.full((2, 6), len(pts)), 1.0)
    np.testing.assert_array_equal(out, np.broadcast_to(np.eye(3), (2, 3, 3)))
