"""FedBN: federated learning with local batch normalization (fedbn_local_batch_normalization.txt
§4 and App. C, Alg. 1).

Layer rule: BatchNorm, as naive BN (batch statistics in training, running statistics in
evaluation). Client statistics and server aggregation: none — every BatchNorm parameter and
buffer (affine weight and bias, running mean and variance, batch counter) is a local key, so it
never leaves its client and is never averaged (Alg. 1 line 7: "if layer l is not BatchNorm");
the algorithm averages every other weight. The engine then evaluates each client with its own
BatchNorm state, on its own test split when the partition has one (FedBN §5: "we split an
independent testing datasets on clients").

Aggregation weights (``norm.weighting``): ``uniform`` (default) averages the shared weights with
1/K over the round's K clients, as Alg. 1 line 8 and the official code (``client_weights =
[1/client_num]``); ``size`` weights them by the clients' training-data sizes (FedAvg's rule, this
project's behaviour before the option; fidelity audit #8). The two agree when the clients hold
equally many samples (Digits-5, Office-Caltech10 and DomainNet truncated as in FedBN §5) and
differ on ABIDE (unequal sites, App. D Table 10) and on untruncated runs (App. E.6).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from fedbn_bench.core.updates import Statistics
from fedbn_bench.errors import ConfigError
from fedbn_bench.norms.base import NORMS
from fedbn_bench.norms.bn import BatchNorm, BNConfig


WEIGHTINGS = ("uniform", "size")


@dataclass
class FedBNConfig(BNConfig):
    name: str = "fedbn"
    weighting: str = "uniform"
    """How the shared weights are averaged: ``uniform`` (1/K, Alg. 1 line 8) or ``size``."""


@NORMS.register("fedbn")
class FedBN(BatchNorm):
    config_class = FedBNConfig

    def __init__(self, cfg: FedBNConfig) -> None:
        super().__init__(cfg)
        if cfg.weighting not in WEIGHTINGS:
            raise ConfigError(f"norm.weighting='{cfg.weighting}' is unknown; allowed: {', '.join(WEIGHTINGS)}")

    def client_weights(self, weights: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
        """1/K for each of the round's K clients (Alg. 1 line 8), or proportional to ``sizes``."""
        if self.cfg.weighting == "uniform":
            return torch.full_like(weights, 1.0 / len(weights))
        sizes = sizes.to(torch.float64)
        return (sizes / sizes.sum()).to(weights.dtype)

    def client_statistics(self, model: nn.Module, num_samples: int) -> Statistics:
        return {}

    def local_keys(self, model: nn.Module) -> list[str]:
        """Every state entry of every BatchNorm module (selected by type)."""
        return self.norm_state_keys(model)
