from __future__ import annotations

import math

import pytest
import torch

from pcreg.geometry import (
    apply_transform,
    compose_transforms,
    invert_transform,
    make_transform,
    orthonormalize_rotation,
    random_rotation,
    random_transform,
    rotation_from_axis_angle,
)


def test_random_rotations_are_in_so3(gen):
    rot = random_rotation(gen, (500,), dtype=torch.float64)
    eye = torch.eye(3, dtype=torch.float64).expand(500, 3, 3)
    torch.testing.assert_close(rot.transpose(1, 2) @ rot, eye, atol=1e-12, rtol=0)
    torch.testing.assert_close(torch.det(rot), torch.ones(500, dtype=torch.float64))


def test_random_rotations_are_uniform(gen):
    # Haar measure: the rotation angle theta has density (1 - cos theta) / pi, so
    # E[cos theta] = -1/2, i.e. E[trace R] = 1 + 2 E[cos theta] = 0.
    rot = random_rotation(gen, (20000,), dtype=torch.float64)
    mean_trace = rot.diagonal(dim1=-2, dim2=-1).sum(-1).mean()
    assert abs(float(mean_trace)) < 0.03  # std of trace is 1, so 3 sigma = 0.021


def test_same_generator_seed_same_draws():
    a = random_transform(torch.Generator().manual_seed(7), (3,))
    b = random_transform(torch.Generator().manual_seed(7), (3,))
    assert torch.equal(a, b)


def test_inverse_and_compose(gen):
    t1 = random_transform(gen, (4,), max_translation=5.0, dtype=torch.float64)
    t2 = random_transform(gen, (4,), max_translation=5.0, dtype=torch.float64)
    t3 = random_transform(gen, (4,), max_translation=5.0, dtype=torch.float64)
    eye = torch.eye(4, dtype=torch.float64).expand(4, 4, 4)
    torch.testing.assert_close(compose_transforms(t1, invert_transform(t1)), eye)
    torch.testing.assert_close(
        compose_transforms(compose_transforms(t1, t2), t3),
        compose_transforms(t1, compose_transforms(t2, t3)),
    )
    pts = torch.randn(4, 10, 3, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(apply_transform(apply_transform(pts, t1), invert_transform(t1)), pts)
    # compose(A, B) applies B first.
    torch.testing.assert_close(
        apply_transform(pts, compose_transforms(t1, t2)),
        apply_transform(apply_transform(pts, t2), t1),
    )


def test_apply_transform_golden():
    rot = rotation_from_axis_angle(torch.tensor([0.0, 0.0, 1.0]), torch.tensor(math.pi / 2))
    t = make_transform(rot, torch.tensor([1.0, 2.0, 3.0]))
    out = apply_transform(torch.tensor([[1.0, 0.0, 0.0]]), t)
    torch.testing.assert_close(out, torch.tensor([[1.0, 3.0, 3.0]]))  # x -> y, then + t


def test_orthonormalize_fixes_slightly_off_rotation(gen):
    rot = random_rotation(gen, dtype=torch.float64)
    noisy = rot + 1e-3 * torch.randn(3, 3, generator=gen, dtype=torch.float64)
    fixed = orthonormalize_rotation(noisy)
    torch.testing.assert_close(fixed.T @ fixed, torch.eye(3, dtype=torch.float64))
    assert float(torch.det(fixed)) == pytest.approx(1.0)
    assert float((fixed - rot).abs().max()) < 5e-3


def test_make_transform_broadcasts_leading_dimensions():
    rot = torch.eye(3).expand(2, 1, 3, 3) * torch.tensor([1.0, -1.0]).view(2, 1, 1, 1)
    trans = torch.arange(9.0).view(3, 3)  # (3, 3): broadcasts with (2, 1) to (2, 3)
    out = make_transform(rot, trans)
    assert out.shape == (2, 3, 4, 4)
    assert torch.equal(out[1, 2, :3, :3], -torch.eye(3))
    assert torch.equal(out[0, 1, :3, 3], torch.tensor([3.0, 4.0, 5.0]))
    assert torch.equal(out[..., 3, :], torch.tensor([0.0, 0.0, 0.0, 1.0]).expand(2, 3, 4))
    with pytest.raises((ValueError, RuntimeError)):  # shapes that do not broadcast
        make_transform(torch.eye(3).expand(2, 3, 3), torch.zeros(3, 3))


def test_make_transform_does_not_load_torch_symbolic_shapes():
    # torch.broadcast_shapes imports torch's symbolic-shapes machinery on first use: 0.47 s of
    # every process's first registration on the 2-core Xeon
    import subprocess
    import sys

    code = (
        "import sys, torch\n"
        "from pcreg.geometry import make_transform\n"
        "make_transform(torch.eye(3)[None], torch.zeros(1, 3))\n"
        "print('torch.fx.experimental.symbolic_shapes' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
