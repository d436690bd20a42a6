"""FedBN: federated learning with local batch normalization (fedbn_local_batch_normalization.txt
§4 and App. C, Alg. 1).

Layer rule: BatchNorm, as naive BN (batch statistics in training, running statistics in
evaluation). Client statistics and server aggregation: none — every BatchNorm parameter and
buffer (affine weight and bias, running mean and variance, batch counter) is a local key, so it
never leaves its client and is never averaged (Alg. 1 line 7: "if layer l is not BatchNorm");
the algorithm averages every other weight. The engine then evaluates each client with its own
BatchNorm state, on its own test split when the partition has one (FedBN §5: "we split an
independent testing datasets on clients").
"""
from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from fedbn_bench.core.updates import Statistics
from fedbn_bench.norms.base import NORMS
from fedbn_bench.norms.bn import BatchNorm, BNConfig


@dataclass
class FedBNConfig(BNConfig):
    name: str = "fedbn"


@NORMS.register("fedbn")
class FedBN(BatchNorm):
    config_class = FedBNConfig

    def client_statistics(self, model: nn.Module, num_samples: int) -> Statistics:
        return {}

    def local_keys(self, model: nn.Module) -> list[str]:
        """Every state entry of every BatchNorm module (selected by type)."""
        return [f"{name}.{key}" for name, module in self.norm_modules(model).items() for key in module.state_dict()]
