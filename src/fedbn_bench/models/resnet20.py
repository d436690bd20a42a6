"""``resnet20``: the CIFAR ResNet-20 of the FixBN paper (fixbn_making_bn_great.txt, §5 and
App. A Table F: "ResNet20 [13]" on CIFAR-10), i.e. the CIFAR ResNet of He et al. [13, §4.2].

Architecture (6n+2 layers with n = 3)::

    conv3x3(C->16) norm ReLU
    stage 1: 3 basic blocks, 16 channels, stride 1
    stage 2: 3 basic blocks, 32 channels, first block stride 2
    stage 3: 3 basic blocks, 64 channels, first block stride 2
    global average pool -> 64 features                 <- forward_features ends here
    Linear(64 -> num_classes)                           <- head

A basic block is ``conv3x3 norm ReLU conv3x3 norm (+ shortcut) ReLU``. Convolutions have no bias
(each is followed by a norm), and are initialized with He (fan-out) normal init.

Shortcuts: the FixBN paper does not describe them, so the default is the usual CIFAR ResNet-20 of
[13, §4.2], which uses parameter-free identity shortcuts everywhere ("option A": subsample by 2
and zero-pad the new channels where the shape changes): ``shortcut="identity"``, 19 norm layers
(1 stem + 9 blocks x 2). ``shortcut="projection"`` ("option B") uses a 1x1 stride-2 conv + norm
on the two shape-changing shortcuts, as the Caffe ResNet-20 of Hsieh et al. [14] (the FL study that
FixBN App. B revisits) does: 21 norm layers. All norms are on conv maps (dims=2).

Small inputs: all convolutions are padded 3x3 (stride-2 ones give ceil(H/2)) and the pool is a
global average, so any input of at least 1x1 works (8x8: 8 -> 8 -> 4 -> 2). No padding is needed.
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from fedbn_bench.errors import ConfigError
from fedbn_bench.models.base import FeatureClassifier, check_num_classes, image_shape, make_norm
from fedbn_bench.models.registry import NormFactory, register_model

SHORTCUTS = ("identity", "projection")


class ZeroPadShortcut(nn.Module):
    """Option-A shortcut: spatial subsampling by ``stride`` and zero channels up to ``out_channels``."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        extra = out_channels - in_channels
        self.channel_pad = (extra // 2, extra - extra // 2)

    def forward(self, x: Tensor) -> Tensor:
        if self.stride > 1:
            x = x[:, :, :: self.stride, :: self.stride]
        return F.pad(x, (0, 0, 0, 0, *self.channel_pad))


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with norms and a residual connection."""

    def __init__(
        self, norm_layer: NormFactory, in_channels: int, out_channels: int, stride: int, shortcut: str
    ) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.norm1 = make_norm(norm_layer, out_channels, 2)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.norm2 = make_norm(norm_layer, out_channels, 2)
        self.relu = nn.ReLU()
        self.shortcut: nn.Module
        if stride == 1 and in_channels == out_channels:
            self.shortcut = nn.Identity()
        elif shortcut == "identity":
            self.shortcut = ZeroPadShortcut(in_channels, out_channels, stride)
        else:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                make_norm(norm_layer, out_channels, 2),
            )

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


@register_model("resnet20")
class ResNet20(FeatureClassifier):
    """CIFAR ResNet-20; option ``shortcut`` is "identity" (option A, default) or "projection"."""

    def __init__(
        self,
        norm_layer: NormFactory,
        input_shape: tuple[int, ...],
        num_classes: int,
        *,
        shortcut: str = "identity",
    ) -> None:
        super().__init__()
        c, h, w = image_shape(input_shape, "resnet20")
        num_classes = check_num_classes(num_classes)
        if shortcut not in SHORTCUTS:
            raise ConfigError(f"resnet20 option 'shortcut' must be one of {list(SHORTCUTS)}, got {shortcut!r}")
        self.stem = nn.Sequential(
            nn.Conv2d(c, 16, 3, 1, 1, bias=False), make_norm(norm_layer, 16, 2), nn.ReLU()
        )
        blocks: list[nn.Module] = []
        cin = 16
        for stage, cout in enumerate((16, 32, 64)):
            for i in range(3):
                stride = 2 if stage > 0 and i == 0 else 1
                blocks.append(BasicBlock(norm_layer, cin, cout, stride, shortcut))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1))
        self.head = nn.Linear(64, num_classes)
        self.input_shape, self.num_classes, self.feature_dim = (c, h, w), num_classes, 64
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward_features(self, x: Tensor) -> Tensor:
        return self.pool(self.blocks(self.stem(x)))
