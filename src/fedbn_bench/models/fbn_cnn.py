"""``fbn_cnn``: the CIFAR-10 CNN of the FBN paper (fbn_federated_batchnorm.txt, App. C.1, Table 1).

Layers, as in Table 1 (note the paper's order Conv -> ReLU -> BatchNorm, kept here)::

    conv3x3(C->64,  pad 1) ReLU norm
    conv3x3(64->64, pad 1) ReLU norm  MaxPool(2,2) Dropout(0.25)
    conv3x3(64->128, pad 1) ReLU norm
    conv3x3(128->128, pad 1) ReLU norm MaxPool(2,2) Dropout(0.25)
    Linear(flat -> 128) ReLU                       <- forward_features ends here
    Linear(128 -> num_classes)                     <- head (the table's log-softmax is left to
                                                      the cross-entropy loss)

Four norm layers, all on conv maps (dims=2); the linear layers have none, as in the table.
``flat`` is 8192 for 3x32x32 inputs (the table's value) and is measured by a dummy forward.

Small inputs: the convolutions keep the spatial size, so only the pools shrink the maps. They use
``ceil_mode=True``, which is identical to the paper's pooling on even sides (32 -> 16 -> 8) and
keeps any map at least 1x1 (8x8 digits: 8 -> 4 -> 2, flat = 512). No input padding is needed.

Option ``width`` multiplies the convolution channels (64, 64, 128, 128 at 1.0, Table 1's CNN; 32, 32,
64, 64 at 0.5, about a quarter of the FLOPs). It is a reduction for CPU-scale studies, not the paper's
model: the presets that set it say so. The hidden linear layer keeps its 128 units.
"""
from __future__ import annotations

from torch import Tensor, nn

from fedbn_bench.models.base import FeatureClassifier, check_num_classes, flat_size, image_shape, make_norm
from fedbn_bench.models.registry import NormFactory, register_model


@register_model("fbn_cnn")
class FBNCNN(FeatureClassifier):
    """FBN paper Table 1 CNN; options ``dropout`` (the rate after each pool, default 0.25) and ``width`` (module docstring)."""

    def __init__(
        self,
        norm_layer: NormFactory,
        input_shape: tuple[int, ...],
        num_classes: int,
        *,
        dropout: float = 0.25,
        width: float = 1.0,
    ) -> None:
        super().__init__()
        c, h, w = image_shape(input_shape, "fbn_cnn")
        num_classes = check_num_classes(num_classes)
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"fbn_cnn option 'dropout' must be in [0, 1), got {dropout!r}")
        if not 0.0 < float(width) <= 8.0:
            raise ValueError(f"fbn_cnn option 'width' must be in (0, 8], got {width!r}")
        narrow, wide = max(1, round(64 * float(width))), max(1, round(128 * float(width)))

        def block(cin: int, cout: int) -> list[nn.Module]:
            return [nn.Conv2d(cin, cout, 3, 1, 1), nn.ReLU(), make_norm(norm_layer, cout, 2)]

        self.features = nn.Sequential(
            *block(c, narrow),
            *block(narrow, narrow),
            nn.MaxPool2d(2, 2, ceil_mode=True),
            nn.Dropout(float(dropout)),
            *block(narrow, wide),
            *block(wide, wide),
            nn.MaxPool2d(2, 2, ceil_mode=True),
            nn.Dropout(float(dropout)),
            nn.Flatten(1),
        )
        self.flat_dim = flat_size(self.features, (c, h, w))
        self.fc = nn.Linear(self.flat_dim, 128)
        self.relu = nn.ReLU()
        self.head = nn.Linear(128, num_classes)
        self.input_shape, self.num_classes, self.feature_dim = (c, h, w), num_classes, 128

    def forward_features(self, x: Tensor) -> Tensor:
        return self.relu(self.fc(self.features(x)))
