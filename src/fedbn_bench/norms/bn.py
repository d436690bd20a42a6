"""Naive BatchNorm in FL (FBN §3; FixBN §3 "FedAvg + BN").

Layer rule: batch statistics in training, running statistics in evaluation (Ioffe & Szegedy 2015).
Client statistics: the running mean and variance after local training.
Server aggregation: the aggregate (by default the mean with the algorithm's client weights) of the
means and of the variances — the "naive" rule whose variance ignores the between-client spread
(FBN §3, Eq. (RV) for the correct one).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.updates import State, Statistics
from fedbn_bench.norms.base import NORMS, NormConfig, NormMethod, running_statistics, stacked


@dataclass
class BNConfig(NormConfig):
    name: str = "bn"
    momentum: float = 0.1
    eps: float = 1e-5
    affine: bool = True


@NORMS.register("bn")
class BatchNorm(NormMethod):
    config_class = BNConfig
    layer_types = (nn.modules.batchnorm._BatchNorm,)
    uses_batch_statistics = True

    def norm_layer(self, num_features: int, dims: int) -> nn.Module:
        layer = nn.BatchNorm2d if dims == 2 else nn.BatchNorm1d
        return layer(num_features, eps=self.cfg.eps, momentum=self.cfg.momentum, affine=self.cfg.affine)

    def client_statistics(self, model: nn.Module, num_samples: int) -> Statistics:
        return running_statistics(self.norm_modules(model), num_samples)

    def aggregate_statistics(self, stats: list[Statistics], weights: torch.Tensor, aggregator: Aggregator,
                             global_state: State) -> State:
        out = {}
        for layer in stats[0] if stats else ():
            dtype = stats[0][layer].mean.dtype
            out[f"{layer}.running_mean"] = aggregator(stacked(stats, layer, "mean", dtype), weights)
            out[f"{layer}.running_var"] = aggregator(stacked(stats, layer, "var", dtype), weights)
        return out
