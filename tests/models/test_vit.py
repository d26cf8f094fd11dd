"""ViT architecture: published parameter counts, shapes, attention rollout."""

from __future__ import annotations

import pytest
import torch

from pcreg.layers import count_parameters
from pcreg.models.vit import VIT_CONFIGS, VisionTransformer, attention_rollout, vit_from_name


@pytest.mark.parametrize(
    "name,expected",
    [
        ("vit_base_patch16", 86_567_656),  # ViT-B/16, 224 px, 1000 classes (Dosovitskiy et al.)
        ("vit_small_patch16", 22_050_664),  # DeiT-S
        ("vit_tiny_patch16", 5_717_416),  # DeiT-Ti
    ],
)
def test_published_parameter_counts(name, expected):
    assert count_parameters(vit_from_name(name)) == expected


def test_forward_shapes_and_attention(gen):
    model = vit_from_name("digits").eval()
    x = torch.rand(3, 1, 8, 8, generator=gen)
    logits, attn = model(x, return_attention=True)
    assert logits.shape == (3, 10)
    assert len(attn) == VIT_CONFIGS["digits"].depth
    assert attn[0].shape == (3, 4, 17, 17)
    assert torch.allclose(attn[0].sum(-1), torch.ones(3, 4, 17))
    assert torch.allclose(model(x), logits, atol=1e-6)  # fused path (no weights) agrees
    with pytest.raises(ValueError, match=r"expected images \(B, 1, 8, 8\)"):
        model(torch.zeros(1, 1, 9, 9))
    with pytest.raises(ValueError, match="not a multiple"):
        VisionTransformer(img_size=10, patch_size=4)


def test_batch_items_are_independent(gen):
    model = vit_from_name("digits").eval()
    x = torch.rand(4, 1, 8, 8, generator=gen)
    single = torch.cat([model(x[i : i + 1]) for i in range(4)])
    assert torch.allclose(model(x), single, atol=1e-5)


def test_attention_rollout_values():
    n = 5
    uniform = torch.full((2, 3, n, n), 1.0 / n)
    # one layer, no residual: the class token spreads 1/n over each token
    assert torch.allclose(
        attention_rollout([uniform], residual=False), torch.full((2, n - 1), 1 / n)
    )
    # every token attending only to itself: no flow from patches to the class token
    eye = torch.eye(n).expand(2, 3, n, n)
    assert torch.all(attention_rollout([eye, eye]) == 0)
    # residual rollout of uniform layers: (A + I)/2 twice; class row computed by hand
    a = 0.5 * (torch.full((n, n), 1 / n) + torch.eye(n))
    expected = (a @ a)[0, 1:]
    assert torch.allclose(attention_rollout([uniform, uniform])[0], expected)
