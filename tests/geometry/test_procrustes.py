from __future__ import annotations

import pytest
import torch

from pcreg.geometry import (
    apply_transform,
    random_transform,
    relative_rotation_error_deg,
    relative_translation_error,
    weighted_procrustes,
)


@pytest.mark.parametrize("n", [3, 4, 100])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_recovers_random_transforms_exactly(n, dtype, gen):
    gt = random_transform(gen, (8,), max_translation=10.0, dtype=torch.float64)
    src = torch.randn(8, n, 3, generator=gen, dtype=torch.float64)
    ref = apply_transform(src, gt)
    est = weighted_procrustes(src.to(dtype), ref.to(dtype))
    assert est.dtype == dtype
    assert float(relative_rotation_error_deg(est, gt).max()) < 1e-3
    assert float(relative_translation_error(est, gt).max()) < (
        1e-4 if dtype == torch.float32 else 1e-6
    )


def test_far_from_origin_in_float32(gen):
    gt = random_transform(gen, max_translation=1.0, dtype=torch.float64)
    src = torch.randn(200, 3, generator=gen, dtype=torch.float64) * 20 + 100.0
    ref = apply_transform(src, gt)
    est = weighted_procrustes(src.float(), ref.float())
    assert float(relative_rotation_error_deg(est, gt)) < 1e-3


def test_zero_weights_remove_outliers(gen):
    gt = random_transform(gen, max_translation=2.0, dtype=torch.float64)
    src = torch.randn(100, 3, generator=gen, dtype=torch.float64)
    ref = apply_transform(src, gt)
    ref[:40] = torch.randn(40, 3, generator=gen, dtype=torch.float64) * 3  # 40 % outliers
    weights = torch.ones(100, dtype=torch.float64)
    weights[:40] = 0.0
    est = weighted_procrustes(src, ref, weights)
    assert float(relative_rotation_error_deg(est, gt)) < 1e-3
    assert float(relative_translation_error(est, gt)) < 1e-6
    # Unweighted, the outliers spoil the fit: the weights are doing the work.
    bad = weighted_procrustes(src, ref)
    assert float(relative_rotation_error_deg(bad, gt)) > 1.0


def test_weights_scale_invariant_and_batched_equals_looped(gen):
    src = torch.randn(3, 50, 3, generator=gen, dtype=torch.float64)
    ref = torch.randn(3, 50, 3, generator=gen, dtype=torch.float64)
    w = torch.rand(3, 50, generator=gen, dtype=torch.float64)
    batched = weighted_procrustes(src, ref, w)
    for b in range(3):
        torch.testing.assert_close(batched[b], weighted_procrustes(src[b], ref[b], w[b]))
        torch.testing.assert_close(batched[b], weighted_procrustes(src[b], ref[b], 10 * w[b]))


def test_reflection_is_never_returned(gen):
    # Mirror-image correspondences: the unconstrained optimum is a reflection (det -1).
    src = torch.randn(30, 3, generator=gen, dtype=torch.float64)
    ref = src * torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64)
    est = weighted_procrustes(src, ref)
    assert float(torch.det(est[:3, :3])) == pytest.approx(1.0)


def test_shape_errors():
    with pytest.raises(ValueError, match="src_points and ref_points"):
        weighted_procrustes(torch.rand(5, 3), torch.rand(6, 3))
    with pytest.raises(ValueError, match="weights"):
        weighted_procrustes(torch.rand(5, 3), torch.rand(5, 3), torch.rand(4))
