"""FedFN: feature normalization before the classifier (Kim et al. 2023, "FedFN: Feature
Normalization for Alleviating Data Heterogeneity Problem in Federated Learning"), as the HBN paper
uses it as a baseline (hbn_hybrid_batch_normalisation.txt §4.1, App. B.1, Table 7).

No normalization layer anywhere (``norm_layer`` is the identity); instead the input of one linear
layer is L2-normalized per sample and rescaled, in training and evaluation alike, and gradients
flow through the normalization. Nothing beyond the weights is communicated.

* ``position: classifier`` (default) — the input of the first fully connected layer after the
  last convolution, i.e. the flattened conv features. This is HBN's placement: Table 7 puts the
  FedFN row between Block 3 and FC(1024, 128), and App. B.1 "normalise[s] the input before the
  fully connected layer" (citing Zhang et al. 2024). For models whose only linear layer after the
  convolutions is the head (resnet20, lenet "hsieh"), and for models without convolutions (mlp),
  it is the head.
* ``position: head`` — the input of the final linear layer, the penultimate features (FedFN's
  "feature normalization before the classifier" in its own formulation; Zhang et al.'s FN).
* ``scale: sqrt_dim`` (default) multiplies the unit vector by sqrt(d), d its dimension, as the
  HBN authors' code does (the paper gives no scale); ``scale: unit`` keeps unit norm.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from fedbn_bench.core.packing import PackedLinear, register_packing_rule
from fedbn_bench.errors import ConfigError
from fedbn_bench.norms.base import NORMS, NormConfig, NormMethod

POSITIONS = ("classifier", "head")
SCALES = ("sqrt_dim", "unit")


@dataclass
class FedFNConfig(NormConfig):
    name: str = "fedfn"
    position: str = "classifier"
    scale: str = "sqrt_dim"
    eps: float = 1e-12


class FeatureNormLinear(nn.Linear):
    """A linear layer whose input is first L2-normalized per sample and multiplied by ``factor``.

    A subclass of ``nn.Linear`` with the same parameters, so state-dict keys and ``model.head``
    checks are unchanged.
    """

    def __init__(self, linear: nn.Linear, factor: float, eps: float) -> None:
        super().__init__(linear.in_features, linear.out_features, bias=linear.bias is not None,
                         device=linear.weight.device, dtype=linear.weight.dtype)
        self.load_state_dict(linear.state_dict())
        self.factor, self.eps = factor, eps

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """The features the layer actually receives: ``factor * x / ||x||``."""
        return F.normalize(x, dim=-1, eps=self.eps) * self.factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(self.normalize(x))


@register_packing_rule(FeatureNormLinear)
class PackedFeatureNormLinear(PackedLinear):
    """FedFN's classifier over packed clients: each client's features L2-normalized on their own."""

    def prepare(self, h: torch.Tensor) -> torch.Tensor:
        return self.source.normalize(h)


def classifier_input_layer(model: nn.Module) -> str:
    """Name of the first ``nn.Linear`` after the model's last convolution (``head`` if none)."""
    modules = list(model.named_modules())
    convs = [i for i, (_, m) in enumerate(modules) if isinstance(m, nn.modules.conv._ConvNd)]
    start = convs[-1] + 1 if convs else len(modules)
    return next((name for name, m in modules[start:] if isinstance(m, nn.Linear)), "head")


@NORMS.register("fedfn")
class FedFN(NormMethod):
    config_class = FedFNConfig

    def __init__(self, cfg: FedFNConfig) -> None:
        super().__init__(cfg)
        if cfg.position not in POSITIONS:
            raise ConfigError(f"norm.position='{cfg.position}' is unknown; allowed: {', '.join(POSITIONS)}")
        if cfg.scale not in SCALES:
            raise ConfigError(f"norm.scale='{cfg.scale}' is unknown; allowed: {', '.join(SCALES)}")
        if not cfg.eps > 0:
            raise ConfigError(f"norm.eps={cfg.eps} is invalid: must be > 0")

    def prepare_model(self, model: nn.Module) -> nn.Module:
        """Replace the chosen linear layer by its feature-normalizing twin."""
        name = "head" if self.cfg.position == "head" else classifier_input_layer(model)
        linear = model.get_submodule(name)
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"FedFN needs an nn.Linear at '{name}', got {type(linear).__name__}")
        factor = math.sqrt(linear.in_features) if self.cfg.scale == "sqrt_dim" else 1.0
        parent_name, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent_name), attr, FeatureNormLinear(linear, factor, self.cfg.eps))
        return model
