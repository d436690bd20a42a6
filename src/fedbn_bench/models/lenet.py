"""``lenet``: the LeNet-like CNN of the FixBN paper (fixbn_making_bn_great.txt, App. A Table F and
App. B: "LeNet-like CNN [65] for CIFAR-10").

The paper gives no layer table. Its App. B is an explicit revisit of the BN-vs-GN study of Hsieh et
al. [14], and the LeNet of that study (its released BN-LeNet / GN-LeNet CIFAR-10 networks, GN with
2 groups as FixBN also uses) is the natural reading, so it is the default ``variant="hsieh"``::

    conv5x5(C->32, pad 2, no bias)  MaxPool(3, stride 2)  norm ReLU
    conv5x5(32->32, pad 2, no bias) norm ReLU  AvgPool(3, stride 2)
    conv5x5(32->64, pad 2, no bias) norm ReLU  AvgPool(3, stride 2)   <- features (flattened)
    Linear(flat -> num_classes)                                        <- head

Three norm layers (dims=2); the single linear layer has none. The pools use ``ceil_mode=True``,
which is the pooling arithmetic of the Caffe networks of [14] (3x32x32: 32 -> 16 -> 8 -> 4,
flat = 1024). The norm layers have no affine scale and shift: in ``bnlenet_train_val.prototxt``
each Caffe ``BatchNorm`` layer feeds the ReLU directly, with no ``Scale`` layer, so the network
learns no gamma/beta (``affine=True`` keeps the norm method's own affine parameters instead).

``variant="lenet5"`` is the classic LeNet-5 of [65] with a norm after each convolution (two norm
layers, none in the FC layers; affine as the norm method builds it unless ``affine=False``)::

    conv5x5(C->6, valid)  norm ReLU MaxPool(2,2)
    conv5x5(6->16, valid) norm ReLU MaxPool(2,2)
    Linear(flat -> 120) ReLU  Linear(120 -> 84) ReLU                   <- features (84)
    Linear(84 -> num_classes)                                          <- head

Small inputs: pools use ``ceil_mode=True``; an input smaller than the smallest side the
architecture can process is zero-padded symmetrically up to that side (``MIN_SIDE``), so no map
ever shrinks below 1x1 and no valid convolution is larger than its input. ``MIN_SIDE`` is 8 for
"hsieh" (8 -> 4 -> 2 -> 1, so 8x8 digits need no padding) and 13 for "lenet5" (13 -> 9 -> 5 -> 1;
8x8 digits are padded to 13x13, 28x28 and 32x32 inputs are not padded).
"""
from __future__ import annotations

from typing import Optional

from torch import Tensor, nn

from fedbn_bench.errors import ConfigError
from fedbn_bench.models.base import (
    FeatureClassifier,
    check_num_classes,
    flat_size,
    image_shape,
    make_norm,
    without_affine,
    zero_pad_to,
)
from fedbn_bench.models.registry import NormFactory, register_model

MIN_SIDE = {"hsieh": 8, "lenet5": 13}
"""Smallest input side each variant can process without padding."""
AFFINE = {"hsieh": False, "lenet5": True}
"""Whether each variant's norm layers keep their affine parameters when ``affine`` is null."""


@register_model("lenet")
class LeNet(FeatureClassifier):
    """FixBN's LeNet-like CNN; options ``variant`` ("hsieh", default, or "lenet5") and ``affine``
    (null = the variant's source: none for "hsieh", the norm method's for "lenet5")."""

    def __init__(
        self,
        norm_layer: NormFactory,
        input_shape: tuple[int, ...],
        num_classes: int,
        *,
        variant: str = "hsieh",
        affine: Optional[bool] = None,
    ) -> None:
        super().__init__()
        c, h, w = image_shape(input_shape, "lenet")
        num_classes = check_num_classes(num_classes)
        if variant not in MIN_SIDE:
            raise ConfigError(f"lenet option 'variant' must be one of {sorted(MIN_SIDE)}, got {variant!r}")
        if affine is None:
            affine = AFFINE[variant]
        elif not isinstance(affine, bool):
            raise ConfigError(f"lenet option 'affine' must be true, false or null, got {affine!r}")
        self.variant, self.affine = variant, affine

        def norm(num_features: int) -> nn.Module:
            layer = make_norm(norm_layer, num_features, 2)
            return layer if affine else without_affine(layer)

        self.pad = zero_pad_to(MIN_SIDE[variant], h, w)
        if variant == "hsieh":
            self.features = nn.Sequential(
                nn.Conv2d(c, 32, 5, 1, 2, bias=False),
                nn.MaxPool2d(3, 2, ceil_mode=True),
                norm(32),
                nn.ReLU(),
                nn.Conv2d(32, 32, 5, 1, 2, bias=False),
                norm(32),
                nn.ReLU(),
                nn.AvgPool2d(3, 2, ceil_mode=True),
                nn.Conv2d(32, 64, 5, 1, 2, bias=False),
                norm(64),
                nn.ReLU(),
                nn.AvgPool2d(3, 2, ceil_mode=True),
                nn.Flatten(1),
            )
            self.flat_dim = flat_size(nn.Sequential(self.pad, self.features), (c, h, w))
            self.classifier: nn.Module = nn.Identity()
            self.feature_dim = self.flat_dim
        else:
            self.features = nn.Sequential(
                nn.Conv2d(c, 6, 5),
                norm(6),
                nn.ReLU(),
                nn.MaxPool2d(2, 2, ceil_mode=True),
                nn.Conv2d(6, 16, 5),
                norm(16),
                nn.ReLU(),
                nn.MaxPool2d(2, 2, ceil_mode=True),
                nn.Flatten(1),
            )
            self.flat_dim = flat_size(nn.Sequential(self.pad, self.features), (c, h, w))
            self.classifier = nn.Sequential(
                nn.Linear(self.flat_dim, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU()
            )
            self.feature_dim = 84
        self.head = nn.Linear(self.feature_dim, num_classes)
        self.input_shape, self.num_classes = (c, h, w), num_classes

    def forward_features(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(self.pad(x)))
