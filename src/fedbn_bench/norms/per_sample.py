"""Normalizations without batch statistics: GroupNorm, LayerNorm, InstanceNorm, and none.

They need no client statistics and no server aggregation beyond the algorithm's own averaging of
their affine weights. GroupNorm's default of 2 groups follows HBN §4.1 and FixBN App. B.
LayerNorm is GroupNorm with one group (normalizes over C, H, W of each sample); InstanceNorm is
GroupNorm with one channel per group. On flat features (``dims`` 1) GroupNorm and LayerNorm apply
the same group rule; InstanceNorm is undefined there (one value per group) and becomes identity.
"""
from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from fedbn_bench.errors import ConfigError
from fedbn_bench.norms.base import NORMS, NormConfig, NormMethod


@dataclass
class GNConfig(NormConfig):
    name: str = "gn"
    groups: int = 2
    eps: float = 1e-5
    affine: bool = True


@dataclass
class PerSampleConfig(NormConfig):
    eps: float = 1e-5
    affine: bool = True


@NORMS.register("gn")
class GroupNormMethod(NormMethod):
    config_class = GNConfig
    layer_types = (nn.GroupNorm,)

    def norm_layer(self, num_features: int, dims: int) -> nn.Module:
        groups = self.cfg.groups
        if groups < 1 or num_features % groups:
            raise ConfigError(f"norm.groups={groups} is invalid: GroupNorm needs >= 1 groups that divide every "
                              f"normalized layer (this model has one of {num_features} channels)")
        return nn.GroupNorm(groups, num_features, eps=self.cfg.eps, affine=self.cfg.affine)


@NORMS.register("ln")
class LayerNormMethod(NormMethod):
    config_class = PerSampleConfig
    layer_types = (nn.GroupNorm,)

    def norm_layer(self, num_features: int, dims: int) -> nn.Module:
        return nn.GroupNorm(1, num_features, eps=self.cfg.eps, affine=self.cfg.affine)


@NORMS.register("in")
class InstanceNormMethod(NormMethod):
    config_class = PerSampleConfig
    layer_types = (nn.GroupNorm,)

    def norm_layer(self, num_features: int, dims: int) -> nn.Module:
        if dims == 1:
            return nn.Identity()
        return nn.GroupNorm(num_features, num_features, eps=self.cfg.eps, affine=self.cfg.affine)


@NORMS.register("none")
class NoNorm(NormMethod):
    config_class = NormConfig
