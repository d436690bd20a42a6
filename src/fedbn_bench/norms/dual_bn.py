"""Dual BatchNorm (DBN): FedRBN §4 and App. C.1 (Hong et al., "Federated Robustness Propagation").

Layer rule: two sets of running statistics, ``clean`` (BN_c) and ``adv`` (BN_a), with one shared
affine (γ, β) (the official code's ``DualNormLayer(share_affine=True)``). The active branch is
chosen by ``DualBN.branch(model, name)``: adversarial training normalizes clean inputs with
BN_c and adversarial inputs with BN_a; testing uses BN_a or BN_c (``adversarial.test_branch``).
``frozen`` makes a branch normalize with its running statistics even in training mode (the PNC
loss's BN_a, FedRBN Eq. 5; the code's ``set_dbn_n_train(False)``). In the clean branch the layer
is exactly ``nn.BatchNorm`` (same buffers, same update, same output).

``norm=dbn`` averages every DBN entry like naive BN does (FedRBN Table 2's ``FATAvg+DBN``): both
branches' running statistics are uploaded and aggregated, the affine with the weights.
``norm=fedrbn`` (``norms/fedrbn.py``) keeps them local and propagates BN_a.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.packing import PackedLayer, register_packing_rule
from fedbn_bench.core.updates import LayerStatistics, State, Statistics
from fedbn_bench.errors import ConfigError
from fedbn_bench.norms.base import NORMS, NormConfig, NormMethod, running_statistics, stacked

BRANCHES = ("clean", "adv")
ADV_SUFFIX = ":adv"
"""Statistics of the adversarial branch are uploaded under ``<layer>:adv``."""


class DualBatchNorm(nn.Module):
    """BatchNorm with clean and adversarial running statistics and one shared affine."""

    def __init__(self, num_features: int, dims: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        super().__init__()
        self.num_features, self.dims, self.eps, self.momentum = num_features, dims, eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        for prefix in ("", "adv_"):
            self.register_buffer(f"{prefix}running_mean", torch.zeros(num_features))
            self.register_buffer(f"{prefix}running_var", torch.ones(num_features))
            self.register_buffer(f"{prefix}num_batches_tracked", torch.tensor(0, dtype=torch.long))
        self.branch = "clean"
        self.frozen = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        expected = 4 if self.dims == 2 else 2
        if x.dim() != expected:
            raise ValueError(f"DualBatchNorm (dims={self.dims}) expects {expected}-D input, got {x.dim()}-D")
        prefix = "adv_" if self.branch == "adv" else ""
        mean, var = getattr(self, f"{prefix}running_mean"), getattr(self, f"{prefix}running_var")
        batch_stats = self.training and not self.frozen
        if batch_stats:
            getattr(self, f"{prefix}num_batches_tracked").add_(1)
        return F.batch_norm(x, mean, var, self.weight, self.bias, batch_stats, self.momentum, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_features}, dims={self.dims}, eps={self.eps}, momentum={self.momentum}, branch={self.branch}"


@register_packing_rule(DualBatchNorm)
class PackedDualBatchNorm(PackedLayer):
    """``DualBatchNorm`` over ``n * C`` packed channels: the branch and ``frozen`` switches are read
    from the source layer at call time (``DualBN.branch`` sets them on the model), each channel's
    statistics come from its own client's batch, as in ``DualBatchNorm.forward``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.source
        prefix = "adv_" if s.branch == "adv" else ""
        batch_stats = self.training and not s.frozen
        if batch_stats:
            getattr(self, f"{prefix}num_batches_tracked").add_(1)
        return F.batch_norm(x, self.flat(f"{prefix}running_mean"), self.flat(f"{prefix}running_var"),
                            self.flat("weight"), self.flat("bias"), batch_stats, s.momentum, s.eps)


@dataclass
class DBNConfig(NormConfig):
    name: str = "dbn"
    momentum: float = 0.1
    eps: float = 1e-5


@NORMS.register("dbn")
class DualBN(NormMethod):
    config_class = DBNConfig
    layer_types = (DualBatchNorm,)
    uses_batch_statistics = True
    branches = BRANCHES

    def norm_layer(self, num_features: int, dims: int) -> nn.Module:
        return DualBatchNorm(num_features, dims, eps=self.cfg.eps, momentum=self.cfg.momentum)

    @contextlib.contextmanager
    def branch(self, model: nn.Module, name: str, frozen: bool = False) -> Iterator[None]:
        if name not in BRANCHES:
            raise ConfigError(f"dual BN branch '{name}' is unknown; allowed: {', '.join(BRANCHES)}")
        modules = list(self.norm_modules(model).values())
        saved = [(m.branch, m.frozen) for m in modules]
        for m in modules:
            m.branch, m.frozen = name, frozen
        try:
            yield
        finally:
            for m, (b, f) in zip(modules, saved):
                m.branch, m.frozen = b, f

    def client_statistics(self, model: nn.Module, num_samples: int) -> Statistics:
        """Both branches' running statistics (the adversarial one under ``<layer>:adv``)."""
        modules = self.norm_modules(model)
        out = running_statistics(modules, num_samples)
        for name, m in modules.items():
            out[name + ADV_SUFFIX] = LayerStatistics(m.adv_running_mean.detach().clone(),
                                                     m.adv_running_var.detach().clone(), out[name].count)
        return out

    def aggregate_statistics(self, stats: list[Statistics], weights: torch.Tensor, aggregator: Aggregator,
                             global_state: State) -> State:
        """Each branch's means and variances aggregated as naive BN does (``FATAvg+DBN``)."""
        out = {}
        for layer in stats[0] if stats else ():
            module, prefix = (layer[: -len(ADV_SUFFIX)], "adv_") if layer.endswith(ADV_SUFFIX) else (layer, "")
            dtype = stats[0][layer].mean.dtype
            out[f"{module}.{prefix}running_mean"] = aggregator(stacked(stats, layer, "mean", dtype), weights)
            out[f"{module}.{prefix}running_var"] = aggregator(stacked(stats, layer, "var", dtype), weights)
        return out
