"""FixBN, Zhong et al. (fixbn_making_bn_great.txt, §4.2 "Two-stage training", App. C.1 Table H).

Stage I, rounds ``t < T*`` (exploration): exactly naive BN (``norms/bn.py``): batch statistics in
training, running statistics averaged by the server.

Stage II, rounds ``t >= T*`` (calibration): the aggregated global statistics ``S̄^(T*)`` are
frozen. Clients normalize with them in local training (no gradient flows through them: they are
constants) and never update them; nothing is uploaded, the server keeps them, and evaluation
uses them. ``T* = floor(freeze_fraction · rounds)`` with the paper's default of 50% of the rounds.

Option ``freeze_affine`` (App. C.1, Table H) also fixes BN's affine ``(γ, β)`` in stage II: they
stop receiving gradients (``requires_grad=False``), so SGD neither steps nor decays them.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from fedbn_bench.core.packing import PackedBatchNorm, register_packing_rule
from fedbn_bench.core.updates import Statistics
from fedbn_bench.errors import ConfigError
from fedbn_bench.norms.base import NORMS
from fedbn_bench.norms.bn import BatchNorm, BNConfig


@dataclass
class FixBNConfig(BNConfig):
    name: str = "fixbn"
    freeze_fraction: float = 0.5
    freeze_affine: bool = False


class _FixBatchNormMixin:
    """BatchNorm that, once ``use_global_stats`` is set, trains with its running statistics."""

    use_global_stats: bool = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training and self.use_global_stats):
            return super().forward(x)
        self._check_input_dim(x)
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0, self.eps)


class FixBatchNorm1d(_FixBatchNormMixin, nn.BatchNorm1d):
    """``nn.BatchNorm1d`` with FixBN's stage-II switch."""


class FixBatchNorm2d(_FixBatchNormMixin, nn.BatchNorm2d):
    """``nn.BatchNorm2d`` with FixBN's stage-II switch."""


@register_packing_rule(FixBatchNorm1d, FixBatchNorm2d)
class PackedFixBatchNorm(PackedBatchNorm):
    """FixBN's layer over ``n * C`` packed channels: stage II normalizes with each client's frozen
    statistics, stage I is BatchNorm's rule."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.source
        if self.training and s.use_global_stats:
            return F.batch_norm(x, self.flat("running_mean"), self.flat("running_var"), self.flat("weight"),
                                self.flat("bias"), False, 0.0, s.eps)
        return super().forward(x)


def freeze_round(freeze_fraction: float, total_rounds: int) -> int:
    """``T*``: the first (0-based) round of stage II."""
    return int(freeze_fraction * total_rounds)


@NORMS.register("fixbn")
class FixBN(BatchNorm):
    config_class = FixBNConfig
    layer_types = (FixBatchNorm1d, FixBatchNorm2d)

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        if not 0 <= cfg.freeze_fraction <= 1:
            raise ConfigError(f"norm.freeze_fraction={cfg.freeze_fraction} is invalid: must be in [0, 1]")
        self.frozen = False

    def norm_layer(self, num_features: int, dims: int) -> nn.Module:
        layer = FixBatchNorm2d if dims == 2 else FixBatchNorm1d
        return layer(num_features, eps=self.cfg.eps, momentum=self.cfg.momentum, affine=self.cfg.affine)

    def on_round_start(self, round_idx: int, total_rounds: int, model: nn.Module) -> None:
        self.frozen = round_idx >= freeze_round(self.cfg.freeze_fraction, total_rounds)
        for layer in self.norm_modules(model).values():
            layer.use_global_stats = self.frozen
            if self.cfg.freeze_affine and layer.affine:
                layer.weight.requires_grad_(not self.frozen)
                layer.bias.requires_grad_(not self.frozen)

    def client_statistics(self, model: nn.Module, num_samples: int) -> Statistics:
        return {} if self.frozen else super().client_statistics(model, num_samples)
