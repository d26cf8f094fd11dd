"""Shared transformer blocks (torch only): the geometric transformer, the ViT and DETR all
import their attention, layers, feed-forward blocks and positional encodings from here."""

from pcreg.layers.attention import (
    MultiHeadAttention,
    RelativePositionAttention,
    padding_bias,
    scaled_dot_product,
)
from pcreg.layers.blocks import DropPath, Mlp, make_activation
from pcreg.layers.cost import LayerCost, attention_macs, count_parameters, layer_cost
from pcreg.layers.position import (
    LearnedPositionEmbedding,
    SinusoidalEncoding,
    sine_encoding_2d,
    sinusoidal_encoding,
    sinusoidal_linear,
)
from pcreg.layers.transformer import TransformerDecoderLayer, TransformerLayer

__all__ = [
    "DropPath",
    "LayerCost",
    "LearnedPositionEmbedding",
    "Mlp",
    "MultiHeadAttention",
    "RelativePositionAttention",
    "SinusoidalEncoding",
    "TransformerDecoderLayer",
    "TransformerLayer",
    "attention_macs",
    "count_parameters",
    "layer_cost",
    "make_activation",
    "padding_bias",
    "scaled_dot_product",
    "sine_encoding_2d",
    "sinusoidal_encoding",
    "sinusoidal_linear",
]
