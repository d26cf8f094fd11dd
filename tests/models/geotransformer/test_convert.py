"""The upstream key table against names and shapes read from the GeoTransformer release code
(experiments/geotransformer.*.sinkhorn/{backbone,model,config}.py, modules/kpconv/modules.py,
modules/transformer/{rpe,vanilla}_transformer.py, output_layer.py, sinkhorn)."""

from __future__ import annotations

import pytest
import torch

from pcreg.errors import CorruptFileError
from pcreg.layers import count_parameters
from pcreg.models.geotransformer import build_geotransformer, kitti_config, threedmatch_config
from pcreg.models.geotransformer.convert import (
    convert_upstream_state_dict,
    load_upstream_checkpoint,
    upstream_key_table,
)

# (upstream key, shape) as the upstream constructors build them for the 3DMatch config:
# init_dim 64, kernel 15, ResidualBlock mid = out // 4, decoder3 = UnaryBlock(64*24, 64*8),
# decoder2 = LastUnaryBlock(64*12, 256), GeometricTransformer(1024 -> 256 -> 256),
# AttentionOutput expand d -> 2d, LearnableLogOptimalTransport alpha = tensor(1.0).
UPSTREAM_3DMATCH = {
    "backbone.encoder1_1.KPConv.weights": (15, 1, 64),
    "backbone.encoder1_1.KPConv.kernel_points": (15, 3),
    "backbone.encoder1_1.norm.norm.weight": (64,),
    "backbone.encoder1_2.unary1.mlp.weight": (32, 64),
    "backbone.encoder1_2.KPConv.weights": (15, 32, 32),
    "backbone.encoder1_2.unary_shortcut.mlp.weight": (128, 64),
    "backbone.encoder2_1.unary1.mlp.weight": (32, 128),
    "backbone.encoder2_2.unary2.norm.norm.bias": (256,),
    "backbone.encoder4_3.KPConv.weights": (15, 256, 256),
    "backbone.decoder3.mlp.weight": (512, 1536),
    "backbone.decoder3.norm.norm.weight": (512,),
    "backbone.decoder2.mlp.weight": (256, 768),
    "transformer.embedding.proj_d.weight": (256, 256),
    "transformer.in_proj.weight": (256, 1024),
    "transformer.out_proj.weight": (256, 256),
    "transformer.transformer.layers.0.attention.attention.proj_p.weight": (256, 256),
    "transformer.transformer.layers.1.attention.attention.proj_q.weight": (256, 256),
    "transformer.transformer.layers.4.attention.linear.bias": (256,),
    "transformer.transformer.layers.5.output.expand.weight": (512, 256),
    "transformer.transformer.layers.5.output.squeeze.weight": (256, 512),
    "optimal_transport.alpha": (),
}
ABSENT_3DMATCH = [
    "backbone.encoder2_1.unary_shortcut.mlp.weight",  # in == out: identity shortcut
    "backbone.encoder1_1.unary1.mlp.weight",  # ConvBlock has no unary
    "backbone.decoder2.norm.norm.weight",  # LastUnaryBlock: linear only
    "transformer.transformer.layers.1.attention.attention.proj_p.weight",  # cross block
]
UPSTREAM_KITTI = {
    "backbone.encoder5_3.KPConv.weights": (15, 512, 512),
    "backbone.decoder4.mlp.weight": (1024, 3072),
    "transformer.in_proj.weight": (128, 2048),
    "transformer.out_proj.weight": (256, 128),
    "transformer.transformer.layers.2.attention.attention.proj_p.weight": (128, 128),
}


def _fake_upstream(cfg, gen):
    model = build_geotransformer(cfg)
    ours = model.state_dict()
    table = upstream_key_table(cfg)
    return model, {up: torch.randn(ours[k].shape, generator=gen) for up, k in table.items()}


@pytest.mark.parametrize(
    "cfg,expected,absent,params",
    [
        (threedmatch_config(), UPSTREAM_3DMATCH, ABSENT_3DMATCH, 9_829_377),
        (kitti_config(), UPSTREAM_KITTI, [], 25_499_137),
    ],
)
def test_key_table_matches_upstream_names_and_shapes(gen, cfg, expected, absent, params):
    model, fake = _fake_upstream(cfg, gen)
    for key, shape in expected.items():
        assert key in fake, key
        assert tuple(fake[key].shape) == shape, key
    for key in absent:
        assert key not in fake
    assert count_parameters(model) == params
    converted = convert_upstream_state_dict(fake, cfg, model.state_dict())
    model.load_state_dict(converted, strict=True)
    state = model.state_dict()
    assert torch.equal(
        state["backbone.stages.0.0.conv.weights"], fake["backbone.encoder1_1.KPConv.weights"]
    )
    assert torch.equal(
        state["transformer.layers.0.attn.p_proj.weight"],
        fake["transformer.transformer.layers.0.attention.attention.proj_p.weight"],
    )
    last = f"backbone.decoders.{cfg.num_stages - 3}.mlp.weight"
    assert torch.equal(state[last], fake["backbone.decoder2.mlp.weight"])


def test_conversion_errors_name_the_key(gen, tmp_path):
    cfg = threedmatch_config(init_dim=16, group_norm=8, hidden_dim=32, coarse_dim=32, output_dim=32)
    model, fake = _fake_upstream(cfg, gen)
    bad = dict(fake)
    bad["transformer.in_proj.weight"] = torch.zeros(3, 3)
    with pytest.raises(ValueError, match=r"transformer\.in_proj\.weight: shape \(3, 3\)"):
        convert_upstream_state_dict(bad, cfg, model.state_dict())
    bad = dict(fake)
    del bad["optimal_transport.alpha"]
    bad["backbone.encoder9_9.KPConv.weights"] = torch.zeros(1)
    with pytest.raises(ValueError, match=r"encoder9_9.*optimal_transport\.alpha"):
        convert_upstream_state_dict(bad, cfg, model.state_dict())
    path = tmp_path / "release.pth.tar"
    torch.save({"model": fake, "epoch": 40}, path)
    fresh = build_geotransformer(cfg)
    load_upstream_checkpoint(path, fresh)
    assert torch.equal(fresh.matcher.optimal_transport.alpha, fake["optimal_transport.alpha"])
    torch.save({"state": fake}, path)
    with pytest.raises(CorruptFileError, match="no 'model' key"):
        load_upstream_checkpoint(path, fresh)
