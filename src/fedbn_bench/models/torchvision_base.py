"""Shared pieces of the models built from torchvision's architectures (``resnet18``, ``resnet50``,
``vgg11``, ``vgg19``, ``mobilenet_v2``): the HBN paper's deeper networks
(hbn_hybrid_batch_normalisation.txt, §4 "Consistent Compatibility with Classical Deep Networks
Architectures", Table 5 and App. B.4 Fig. 7) and FixBN's ResNet-18.

* ``Norm2dAdapter`` feeds torchvision's ``norm_layer(num_features)`` hook from our factory.
* ``TorchvisionClassifier`` wraps a torchvision network whose final ``nn.Linear`` has been moved out
  as ``head`` (``detach_head``), so ``forward_features`` is the network up to that layer.
* ``option_flag`` and ``option_rate`` check the boolean and dropout options of these models.
"""
from __future__ import annotations

from typing import Optional

from torch import Tensor, nn

from fedbn_bench.errors import ConfigError
from fedbn_bench.models.base import FeatureClassifier, make_norm
from fedbn_bench.models.registry import NormFactory


class Norm2dAdapter:
    """Turns our ``norm_layer(num_features, dims)`` into torchvision's ``norm_layer(num_features)``."""

    def __init__(self, norm_layer: NormFactory) -> None:
        self.norm_layer = norm_layer

    def __call__(self, num_features: int) -> nn.Module:
        return make_norm(self.norm_layer, num_features, 2)


def detach_head(parent: nn.Module, name: str) -> nn.Linear:
    """Replace the final linear layer ``parent.<name>`` by ``nn.Identity`` and return it."""
    head = getattr(parent, name)
    if not isinstance(head, nn.Linear):
        raise TypeError(f"expected the final nn.Linear at '{name}', got {type(head).__name__}")
    parent.add_module(name, nn.Identity())
    return head


class TorchvisionClassifier(FeatureClassifier):
    """A torchvision network ``backbone`` without its final linear layer, which is ``head``."""

    def __init__(self, backbone: nn.Module, head: nn.Linear, input_shape: tuple[int, int, int]) -> None:
        super().__init__()
        self.head, self.backbone = head, backbone
        self.input_shape, self.num_classes, self.feature_dim = input_shape, head.out_features, head.in_features

    def forward_features(self, x: Tensor) -> Tensor:
        return self.backbone(x)


def option_flag(value: Optional[bool], model: str, option: str, *, nullable: bool = False) -> Optional[bool]:
    """Check a boolean option (``null`` allowed when ``nullable``) and return it."""
    if isinstance(value, bool) or (nullable and value is None):
        return value
    allowed = "true, false or null" if nullable else "true or false"
    raise ConfigError(f"{model} option '{option}' must be {allowed}, got {value!r}")


def option_rate(value: float, model: str, option: str = "dropout") -> float:
    """Check a dropout rate in [0, 1) and return it as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) < 1.0:
        raise ConfigError(f"{model} option '{option}' must be a number in [0, 1), got {value!r}")
    return float(value)
