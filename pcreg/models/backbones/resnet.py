"""A small ResNet (He et al., CVPR 2016, basic blocks) for DETR on small images.

torchvision has no CPU build here and DETR only needs a strided feature map, so this is our
own: a 3x3 stem (stride 2), then stages of basic blocks whose first block may stride by 2.
Batch norm can be frozen (DETR freezes the statistics of its pretrained ResNet-50; from
scratch it is usually trained).

Padded batches: given the ``valid`` mask of a bottom-right zero-padded batch, every image's
features equal (up to float rounding) those of the image run alone, unpadded. A 3x3
convolution at an image's right / bottom edge reads one pixel past it: alone that is the
convolution's zero padding, in a batch it is the canvas's padding, which after the first batch
norm (a shift) and ReLU is no longer zero. So :meth:`ResNet.forward` zeroes every feature map
outside the valid region before each convolution reads it, and :meth:`ResNet.feature_mask`
gives the valid region at the output stride (a strided convolution with kernel 3 / padding 1
or kernel 1 / padding 0 maps ``n`` valid pixels to ``ceil(n / s)`` outputs, exactly the
outputs ``i`` with pixel ``s * i`` valid: the mask subsampled with the same stride). Train-mode
batch norm is batch dependent by definition (statistics over the batch and its padding);
the invariance holds in eval mode or with ``frozen_bn``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

__all__ = ["FrozenBatchNorm2d", "ResNet"]


class FrozenBatchNorm2d(nn.Module):
    """Batch norm with fixed statistics and affine parameters (buffers, never trained)."""

    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torch.ones(num_features))
        self.register_buffer("bias", torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x: Tensor) -> Tensor:
        scale = self.weight * (self.running_var + self.eps).rsqrt()
        shift = self.bias - self.running_mean * scale
        return x * scale[None, :, None, None] + shift[None, :, None, None]


def _norm(channels: int, frozen: bool) -> nn.Module:
    return FrozenBatchNorm2d(channels) if frozen else nn.BatchNorm2d(channels)


def _subsample(mask: Tensor, stride: int) -> Tensor:
    """The valid mask ``(B, 1, H, W)`` at the output of a convolution of this stride."""
    return mask if stride == 1 else mask[:, :, ::stride, ::stride]


class _BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, frozen: bool) -> None:
        super().__init__()
        self.stride = stride
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = _norm(c_out, frozen)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = _norm(c_out, frozen)
        self.down = (
            nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), _norm(c_out, frozen))
            if stride != 1 or c_in != c_out
            else nn.Identity()
        )

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """``x`` zero outside ``mask`` ``(B, 1, H, W)`` bool (True = real pixel), when given;
        the output is then zero outside the mask at this block's stride."""
        y = torch.relu(self.bn1(self.conv1(x)))
        if mask is not None:
            mask = _subsample(mask, self.stride)
            y = y.masked_fill(~mask, 0.0)  # conv2 reads one pixel past the edge
        out = torch.relu(self.bn2(self.conv2(y)) + self.down(x))
        return out if mask is None else out.masked_fill(~mask, 0.0)


class ResNet(nn.Module):
    """``images (B, in_chans, H, W)`` -> features ``(B, widths[-1], H / stride, W / stride)``.

    Args:
        widths: channels per stage; depths: basic blocks per stage.
        strides: stride of each stage's first block (the stem adds a factor 2), so
            ``stride = 2 * prod(strides)``.
        frozen_bn: :class:`FrozenBatchNorm2d` instead of trainable batch norm.
    """

    def __init__(
        self,
        widths: Sequence[int] = (32, 64, 128),
        depths: Sequence[int] = (1, 1, 1),
        strides: Sequence[int] = (1, 2, 2),
        in_chans: int = 3,
        frozen_bn: bool = False,
    ) -> None:
        super().__init__()
        if not len(widths) == len(depths) == len(strides):
            raise ValueError("widths, depths and strides need one entry per stage")
        self.stem = nn.Sequential(
            nn.Conv2d(in_chans, widths[0], 3, 2, 1, bias=False),
            _norm(widths[0], frozen_bn),
            nn.ReLU(inplace=True),
        )
        blocks, c = [], widths[0]
        for w, d, s in zip(widths, depths, strides, strict=True):
            for i in range(d):
                blocks.append(_BasicBlock(c, w, s if i == 0 else 1, frozen_bn))
                c = w
        self.blocks = nn.Sequential(*blocks)
        self.out_channels = c
        self.stride = 2 * int(torch.tensor(list(strides)).prod())

    def forward(self, x: Tensor, valid: Tensor | None = None) -> Tensor:
        """``x (B, in_chans, H, W)``; ``valid (B, H, W)`` bool (True = real pixel) for a padded
        batch: features outside each image are then zero and those inside do not depend on the
        padding (module docstring). Without ``valid`` every pixel is real."""
        if valid is None:
            return self.blocks(self.stem(x))
        if valid.shape != (x.shape[0], *x.shape[2:]) or valid.dtype != torch.bool:
            raise ValueError(
                f"valid must be a bool (B, H, W) mask of images {tuple(x.shape)}, "
                f"got {valid.dtype} {tuple(valid.shape)}"
            )
        mask = valid[:, None]
        x = self.stem(x.masked_fill(~mask, 0.0))
        mask = _subsample(mask, 2)
        x = x.masked_fill(~mask, 0.0)
        for block in self.blocks:
            x = block(x, mask)
            mask = _subsample(mask, block.stride)
        return x

    def feature_mask(self, valid: Tensor) -> Tensor:
        """The valid mask ``(B, H, W)`` of the input -> that of the output features ``(B, h, w)``
        (an output is real when the image alone has it)."""
        return valid[:, :: self.stride, :: self.stride]
