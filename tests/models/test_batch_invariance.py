"""Batch invariance: every model gives an input the same output (to 1e-5, float32, eval mode)
whether it runs alone or in a (padded) batch with other inputs of other sizes.

DETR: images of different sizes padded bottom-right into one canvas whose size is not a
multiple of the backbone stride, batch norm with non-trivial statistics (so that padding
which reaches a convolution would show). ViT: fixed-size images, one alone vs in a batch.
Registration: pairs of clouds of different sizes in one padded forward pass vs one at a time.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pcreg.models.detr import DetrConfig, build_detr
from pcreg.models.vit import VisionTransformer, ViTConfig

ATOL = 1e-5


def _pad(images: list[torch.Tensor], fill: torch.Tensor | None = None):
    """Bottom-right padding to the largest height / width (as ``collate_images``), padding
    zero or taken from ``fill``."""
    h = max(im.shape[1] for im in images)
    w = max(im.shape[2] for im in images)
    batch = torch.zeros(len(images), 3, h, w) if fill is None else fill.clone()
    valid = torch.zeros(len(images), h, w, dtype=torch.bool)
    for k, im in enumerate(images):
        batch[k, :, : im.shape[1], : im.shape[2]] = im
        valid[k, : im.shape[1], : im.shape[2]] = True
    return batch, valid


@pytest.fixture(scope="module")
def detr():
    torch.manual_seed(0)
    model = build_detr(
        DetrConfig(
            num_queries=8, d_model=32, ffn_dim=64, enc_layers=2, dec_layers=2,
            backbone_widths=[8, 16, 32], backbone_strides=[1, 2, 2],
        )
    )  # fmt: skip
    # trained-like batch norm: a shift makes the padding non-zero after the first layer
    gen = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.rand(n, generator=gen) - 0.5)
            m.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(n, generator=gen) + 0.5)
            m.bias.data.copy_(torch.rand(n, generator=gen) - 0.5)
    return model.eval()


def test_detr_image_alone_equals_image_in_padded_batch(detr):
    assert detr.backbone.stride == 8
    gen = torch.Generator().manual_seed(2)
    sizes = [(45, 37), (61, 58), (33, 50), (47, 29), (40, 61)]  # canvas 61 x 61, not 8k
    images = [torch.randn(3, h, w, generator=gen) for h, w in sizes]
    batch, valid = _pad(images)
    # padding that is not zero (e.g. zero-padded before normalisation) changes nothing either
    garbage, _ = _pad(images, fill=5 * torch.randn(batch.shape, generator=gen))
    with torch.no_grad():
        together = detr(batch, valid)
        together_garbage = detr(garbage, valid)
        alone = [detr(im[None], torch.ones(1, *im.shape[1:], dtype=torch.bool)) for im in images]
    for out in (together, together_garbage):
        for k, one in enumerate(alone):
            logits, boxes = out["pred_logits"][k], out["pred_boxes"][k]
            assert (logits - one["pred_logits"][0]).abs().max() < ATOL, k
            assert (boxes - one["pred_boxes"][0]).abs().max() < ATOL, k
            assert torch.equal(logits.argmax(-1), one["pred_logits"][0].argmax(-1))
            for aux_b, aux_1 in zip(out["aux_outputs"], one["aux_outputs"], strict=True):
                assert (aux_b["pred_logits"][k] - aux_1["pred_logits"][0]).abs().max() < ATOL
                assert (aux_b["pred_boxes"][k] - aux_1["pred_boxes"][0]).abs().max() < ATOL
    # the images get different predictions, so the equalities are not vacuous
    assert (alone[0]["pred_logits"] - alone[1]["pred_logits"]).abs().max() > 1e-3
    assert (alone[0]["pred_boxes"] - alone[1]["pred_boxes"]).abs().max() > 1e-4


def test_vit_image_alone_equals_image_in_batch():
    torch.manual_seed(0)
    cfg = ViTConfig(
        img_size=16, patch_size=4, in_chans=3, num_classes=10, embed_dim=32, depth=3,
        num_heads=4, mlp_ratio=2.0, dropout=0.1, drop_path=0.1,
    )  # fmt: skip
    model = VisionTransformer(cfg).eval()
    x = torch.randn(16, 3, 16, 16, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        together = model(x)
        together_math, attn = model(x, return_attention=True)  # the explicit softmax path
        alone = torch.cat([model(x[i : i + 1]) for i in range(len(x))])
        alone_attn = [model(x[i : i + 1], return_attention=True)[1] for i in (0, 7)]
    for out in (together, together_math):
        assert (out - alone).abs().max() < ATOL
        assert torch.equal(out.argmax(-1), alone.argmax(-1))
    for i, weights in zip((0, 7), alone_attn, strict=True):
        for w_batch, w_alone in zip(attn, weights, strict=True):
            assert (w_batch[i] - w_alone[0]).abs().max() < ATOL
    assert (alone[0] - alone[1]).abs().max() > 1e-3


def test_registration_pair_alone_equals_pair_in_padded_batch(room_pair):
    from pcreg.demo import _room_pair
    from pcreg.models.geotransformer import GeoTransformerConfig, build_geotransformer
    from pcreg.registration.network import Registrar

    torch.manual_seed(0)
    cfg = GeoTransformerConfig(
        voxel_size=0.1, init_dim=8, group_norm=4, hidden_dim=32, coarse_dim=32, output_dim=32,
        num_points_in_patch=16, sinkhorn_iterations=10, sigma_d=0.8, acceptance_radius=0.4,
        neighbor_limits=(20, 20, 20, 20),
    )  # fmt: skip
    reg = Registrar(build_geotransformer(cfg))
    src, ref, _ = room_pair
    src2, ref2, _ = _room_pair(1)
    # clouds of different sizes: the superpoints are padded to the largest in the batch
    pairs = [(src, ref), (src2[::2], ref2[::3]), (ref[::2], src)]
    together = reg.forward(pairs)  # as Registration.batch calls it
    alone = [reg.forward([p])[0] for p in pairs]
    sizes = {len(reg.collate([p]).pyramid.points[-1]) for p in pairs}
    assert len(sizes) == len(pairs)  # really padded
    for many, one in zip(together, alone, strict=True):
        np.testing.assert_allclose(many.transform, one.transform, atol=ATOL, rtol=0)
        assert many.corr_scores.shape == one.corr_scores.shape
        np.testing.assert_allclose(many.corr_scores, one.corr_scores, atol=ATOL, rtol=0)
        np.testing.assert_allclose(many.src_corr_points, one.src_corr_points, atol=ATOL, rtol=0)
        np.testing.assert_allclose(many.ref_corr_points, one.ref_corr_points, atol=ATOL, rtol=0)
    assert not np.allclose(alone[0].transform, alone[1].transform, atol=1e-3)
