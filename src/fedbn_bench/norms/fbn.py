"""Federated BatchNorm (FBN), Guerraoui et al. (fbn_federated_batchnorm.txt, §4 Alg. 2, App. A).

Layer rule (Alg. 2 line 3, "FBN explained"): in training a client normalizes its batch with the
*shared* running statistics it received from the server, not with the batch's own statistics, so
every client applies the same normalization function (no external covariate shift). The shared
statistics are constants received from the server: no gradient flows through them (unlike BN's
batch statistics). Evaluation uses the running statistics as well.

Client statistics (Alg. 2 lines 4-7): after normalizing, the client updates local running
statistics from the batch mean and biased variance,
``mean ← (1-β) mean + β ū⁽ⁱ⁾`` and ``var ← (1-β) var + β · Kn/(Kn-1) · σ̂⁽ⁱ⁾²``, where ``K`` is the
number of values a channel has in the client's batch (batch size × spatial positions, App. A) and
``n`` the number of clients of the round, so ``Kn`` is the size of the union batch and the factor
is centralized BN's unbiasing (Alg. 1 line 5) of the union. Running mean starts at 0 and variance
at 1 (App. A convention).

Server aggregation (Alg. 2 lines 9-10, law of total variance): ``mean = Σ wᵢ meanᵢ`` and
``var = Σ wᵢ varᵢ + Kn/((Kn-1) β) · Σ wᵢ (meanᵢ - mean)²``. The paper's ``wᵢ = 1/n`` is what DSGD's
client weights give, and only those make the result the statistics of the union batch: every
client contributes ``K`` values to it, so its mean is the *unweighted* mean of the clients' batch
means. Other weights (FedAvg's data sizes) give a weighted pooling instead, which is no longer
the union batch's statistics.

What is exchanged when:

* DSGD (one step per round, the paper's setting, App. B Alg. 3): the server broadcasts weights
  and shared statistics; each client does one forward with them, one statistics update, sends its
  gradient and its running mean/variance; the server applies lines 9-10. With all clients holding
  the same weights, the server's statistics then equal those of centralized BN on the union of
  the clients' batches, round after round (App. A, equations RM and RV; tested).
* Multi-step FedAvg: the statistics received at the start of the round normalize every local
  step (they stay shared for the whole round), while the local running statistics are updated at
  every step and uploaded once with the weights. App. A's identity holds for one step only. After
  ``S`` steps a client's mean deviates from the average by ``1-(1-β)^S`` (not ``β``) times its batch
  means' deviation, so with ``multistep_correction=effective`` (default) the between-client term
  is divided by ``β_S = 1-(1-β)^S`` instead of ``β`` (exact when a client's batch means are constant
  within the round; identical to line 10 when ``S = 1``); ``multistep_correction=paper`` applies
  line 10 literally. Each client therefore uploads, per layer, one extra scalar in its
  statistics' metadata, ``between_scale`` = ``Kn/((Kn-1) β_S)``, which the server uses and does
  not store.

Both aggregates go through the run's aggregator: the mean as ``agg(meanᵢ)`` and the variance as
``agg(varᵢ + scaleᵢ (meanᵢ - mean)²)``, which is line 10 for the weighted mean and lets a robust
rule (FBN §5) replace both without touching this file.

``variant: hbn_code`` is the FBN baseline the HBN authors ran for HBN Tables 1 and 3
(HybridBN ``FedBaseline/models/FBN``), a different algorithm: a client's running statistics are
the plain average of its round's batch means and biased variances (no EMA, no Kn/(Kn-1)); the
server averages the means with the data-size weights and smooths them with its previous value
(``mean = 0.1 m̄ + 0.9 mean_prev``), pools the variances around that *smoothed* mean divided by
``N - 1`` (N the round's total samples), and smooths them the same way.

Loading statistics into a layer (``load_state_dict``, i.e. receiving them from the server) makes
them the shared statistics used for normalization until the next load; ``receive()`` does the same
by hand. The local step counter and the union size are buffers (per client, carried by the
stacked backends); the layer's packing rule is below.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.packing import PackedLayer, register_packing_rule
from fedbn_bench.core.updates import State, Statistics
from fedbn_bench.errors import ConfigError
from fedbn_bench.norms.base import NORMS, NormConfig, NormMethod, running_statistics, stacked

CORRECTIONS = ("effective", "paper")
VARIANTS = ("paper", "hbn_code")
HBN_CODE_SERVER_MOMENTUM = 0.1
"""``avg_momentum`` of the HBN authors' FBN server: the weight of the new aggregate."""
BETWEEN_SCALE = "between_scale"


@dataclass
class FBNConfig(NormConfig):
    name: str = "fbn"
    momentum: float = 0.1
    eps: float = 1e-5
    affine: bool = True
    num_clients: int = 1
    multistep_correction: str = "effective"
    variant: str = "paper"


@torch.no_grad()
def update_running_statistics(x: torch.Tensor, running_mean: torch.Tensor, running_var: torch.Tensor,
                              local_updates: torch.Tensor, union_count: torch.Tensor, momentum: float,
                              num_clients: int, variant: str = "paper") -> None:
    """Alg. 2 lines 4-6 (App. A), in place: EMA of the batch mean and of the union-unbiased batch
    variance, per channel of ``x`` (so the same call serves one client or packed clients);
    ``hbn_code``: the running average of the round's batch means and biased variances."""
    dims = [0, *range(2, x.dim())]
    var, mean = torch.var_mean(x, dim=dims, correction=0)
    if variant == "hbn_code":
        k = local_updates.to(running_mean.dtype)
        k = k.repeat_interleave(running_mean.numel() // k.numel()) if k.dim() else k  # packed: per channel
        running_mean.mul_(k / (k + 1)).add_(mean.to(running_mean.dtype) / (k + 1))
        running_var.mul_(k / (k + 1)).add_(var.to(running_var.dtype) / (k + 1))
        local_updates.add_(1)
        return
    count = x.numel() // x.size(1) * num_clients
    if count < 2:
        raise ValueError("FBN needs at least two values per channel in the union batch (K·n >= 2)")
    running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
    running_var.mul_(1 - momentum).add_(var.to(running_var.dtype), alpha=momentum * count / (count - 1))
    union_count.fill_(count)
    local_updates.add_(1)


class FederatedBatchNorm(nn.Module):
    """One FBN layer (Alg. 2 for one client): normalize with the shared statistics, update local ones.

    Buffers ``running_mean``/``running_var`` hold the client's running statistics (persistent,
    what is uploaded and loaded); ``shared_mean``/``shared_var`` hold the copy received from the
    server that normalizes the batches in training; ``local_updates`` counts the client's
    statistics updates since it received them and ``union_count`` is ``Kn`` (the last three are
    non-persistent: they are a client's round state, never communicated).
    """

    def __init__(
        self,
        num_features: int,
        momentum: float = 0.1,
        eps: float = 1e-5,
        num_clients: int = 1,
        affine: bool = True,
        multistep_correction: str = "effective",
        variant: str = "paper",
    ) -> None:
        super().__init__()
        self.num_features, self.momentum, self.eps = num_features, momentum, eps
        self.num_clients, self.multistep_correction, self.variant = num_clients, multistep_correction, variant
        self.weight = nn.Parameter(torch.ones(num_features)) if affine else None
        self.bias = nn.Parameter(torch.zeros(num_features)) if affine else None
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.register_buffer("shared_mean", torch.zeros(num_features), persistent=False)
        self.register_buffer("shared_var", torch.ones(num_features), persistent=False)
        self.register_buffer("local_updates", torch.zeros((), dtype=torch.float64), persistent=False)
        self.register_buffer("union_count", torch.zeros((), dtype=torch.float64), persistent=False)

    @torch.no_grad()
    def receive(self) -> None:
        """Take the current running statistics as the shared ones (the server's broadcast)."""
        self.shared_mean.copy_(self.running_mean)
        self.shared_var.copy_(self.running_var)
        self.local_updates.zero_()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        if prefix + "running_mean" in state_dict or prefix + "running_var" in state_dict:
            self.receive()

    def _check_input_dim(self, x: torch.Tensor) -> None:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(x)
        if not self.training:
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0, self.eps)
        out = F.batch_norm(x, self.shared_mean, self.shared_var, self.weight, self.bias, False, 0.0, self.eps)
        update_running_statistics(x.detach(), self.running_mean, self.running_var, self.local_updates,
                                  self.union_count, self.momentum, self.num_clients, self.variant)
        return out

    def between_scale(self) -> torch.Tensor:
        """The server's factor for this client's squared mean deviation: Kn/((Kn-1) β_S) (line 10);
        0 before any local update."""
        steps = torch.ones_like(self.local_updates) if self.multistep_correction == "paper" else self.local_updates
        effective = 1 - (1 - self.momentum) ** steps
        scale = self.union_count / ((self.union_count - 1) * effective)
        return torch.where(self.local_updates > 0, scale, torch.zeros_like(scale))

    def extra_repr(self) -> str:
        return f"{self.num_features}, momentum={self.momentum}, eps={self.eps}, num_clients={self.num_clients}"


class FederatedBatchNorm1d(FederatedBatchNorm):
    """FBN over (N, C) or (N, C, L) inputs."""

    def _check_input_dim(self, x: torch.Tensor) -> None:
        if x.dim() not in (2, 3):
            raise ValueError(f"FederatedBatchNorm1d expects 2-D or 3-D input, got {x.dim()}-D")


class FederatedBatchNorm2d(FederatedBatchNorm):
    """FBN over (N, C, H, W) inputs."""

    def _check_input_dim(self, x: torch.Tensor) -> None:
        if x.dim() != 4:
            raise ValueError(f"FederatedBatchNorm2d expects 4-D input, got {x.dim()}-D")


@register_packing_rule(FederatedBatchNorm1d, FederatedBatchNorm2d)
class PackedFederatedBatchNorm(PackedLayer):
    """FBN's layer over ``n * C`` packed channels: each channel normalized with its own client's
    shared statistics, each client's running statistics and counters updated from its own batch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.source
        weight, bias = self.flat("weight"), self.flat("bias")
        if not self.training:
            return F.batch_norm(x, self.flat("running_mean"), self.flat("running_var"), weight, bias, False, 0.0, s.eps)
        out = F.batch_norm(x, self.flat("shared_mean"), self.flat("shared_var"), weight, bias, False, 0.0, s.eps)
        update_running_statistics(x.detach(), self.flat("running_mean"), self.flat("running_var"),
                                  self.local_updates, self.union_count, s.momentum, s.num_clients, s.variant)
        return out


def aggregate_fbn_statistics(stats: list[Statistics], weights: torch.Tensor, aggregator: Aggregator) -> State:
    """Alg. 2 lines 9-10 for every layer in ``stats`` (weights sum to one), through ``aggregator``."""
    out = {}
    for layer in stats[0] if stats else ():
        means, variances = stacked(stats, layer, "mean"), stacked(stats, layer, "var")
        scales = stacked(stats, layer, BETWEEN_SCALE).view(-1, *([1] * (means.dim() - 1)))
        mean = aggregator(means, weights)
        var = aggregator(variances + scales * (means - mean) ** 2, weights)
        dtype = stats[0][layer].mean.dtype
        out[f"{layer}.running_mean"] = mean.to(dtype)
        out[f"{layer}.running_var"] = var.to(dtype)
    return out


def aggregate_hbn_code_statistics(stats: list[Statistics], weights: torch.Tensor, aggregator: Aggregator,
                                  global_state: State) -> State:
    """The HBN authors' FBN server (``FedBaseline/models/FBN/server.py``), through ``aggregator``:
    ``mean = 0.1 agg(meanᵢ) + 0.9 mean_prev``, ``var = 0.1 agg(varᵢ + (meanᵢ - mean)²) N/(N-1) + 0.9
    var_prev`` with the data-size weights and N the clients' total samples."""
    m = HBN_CODE_SERVER_MOMENTUM
    out = {}
    for layer in stats[0] if stats else ():
        means, variances = stacked(stats, layer, "mean"), stacked(stats, layer, "var")
        total = stacked(stats, layer, "count").sum()
        key_mean, key_var = f"{layer}.running_mean", f"{layer}.running_var"
        prev_mean, prev_var = global_state[key_mean].to(torch.float64), global_state[key_var].to(torch.float64)
        mean = m * aggregator(means, weights) + (1 - m) * prev_mean
        pooled = aggregator(variances + (means - mean) ** 2, weights) * (total / (total - 1).clamp_min(1))
        dtype = stats[0][layer].mean.dtype
        out[key_mean] = mean.to(dtype)
        out[key_var] = (m * pooled + (1 - m) * prev_var).to(dtype)
    return out


@NORMS.register("fbn")
class FederatedBN(NormMethod):
    """FBN as a normalization method (layer rule, client statistics, server aggregation above)."""

    config_class = FBNConfig
    layer_types = (FederatedBatchNorm,)
    uses_batch_statistics = True

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        if cfg.num_clients < 1:
            raise ConfigError(f"norm.num_clients={cfg.num_clients} is invalid: must be >= 1 (clients per round)")
        if cfg.multistep_correction not in CORRECTIONS:
            raise ConfigError(
                f"norm.multistep_correction='{cfg.multistep_correction}' is unknown; allowed: {', '.join(CORRECTIONS)}"
            )
        if cfg.variant not in VARIANTS:
            raise ConfigError(f"norm.variant='{cfg.variant}' is unknown; allowed: {', '.join(VARIANTS)}")

    def norm_layer(self, num_features: int, dims: int) -> nn.Module:
        layer = FederatedBatchNorm2d if dims == 2 else FederatedBatchNorm1d
        c = self.cfg
        return layer(num_features, c.momentum, c.eps, c.num_clients, c.affine, c.multistep_correction, c.variant)

    def client_statistics(self, model: nn.Module, num_samples: int) -> Statistics:
        layers = self.norm_modules(model)
        stats = running_statistics(layers, num_samples)
        for name, layer in layers.items():
            stats[name].meta[BETWEEN_SCALE] = layer.between_scale().detach().clone()
        return stats

    def aggregate_statistics(self, stats: list[Statistics], weights: torch.Tensor, aggregator: Aggregator,
                             global_state: State) -> State:
        if self.cfg.variant == "hbn_code":
            return aggregate_hbn_code_statistics(stats, weights, aggregator, global_state)
        return aggregate_fbn_statistics(stats, weights, aggregator)
