"""Hybrid Batch Normalisation (HBN; hbn_hybrid_batch_normalisation.txt §3, Alg. 1).

Layer rule (Eq. 9–10): in training a layer normalizes with a per-channel mix of the batch
statistics (Eq. 1) and the frozen global statistics, ``mu = (1 - w) mu_b + w mu_g`` (same for the
variance) with ``w = sigmoid(alpha)``; the hybrid factor ``alpha`` is learned, initialised to 0
(``w = 0.5``), kept by each client and never communicated (§3.3, Alg. 1 input). Evaluation uses
the global statistics only (§3.3, last paragraph).

Client statistics (Eq. 7, Alg. 1 "without backpropagation"): before training, a client computes
the mean and (biased, App. A.2) variance of every HBN layer's input on its data under the
received global weights. The pass is a function of the global model alone: every HBN layer
normalizes with the received *global* statistics, as at evaluation. That is what App. A.2 needs —
``f(w_g, x)`` is a per-sample function, so pooling the clients' moments gives exactly the
statistics of the union of their data (``stats_forward: global``). The authors' code instead runs
the pass in training mode, so earlier layers use the hybrid rule on the pass batch
(``stats_forward: hybrid``), on one batch of the client's first 64 samples (``stats_samples: 64``;
the paper uses all local data, ``stats_samples: 0``).

Server aggregation: the unbiased pooled mean and variance of Eq. 8, weighted by the number of
values each client's moments summarize (the statistics' ``count``: samples x spatial positions,
so a conv layer's Eq. 8 is exactly the unbiased variance over all values of the union; the
authors' code counts images), then smoothed with the previous global statistics, which the server
holds (Eq. 11, ``lam``; 0.01 in §4.1). Eq. 8 goes through the run's aggregator with the weights
``countᵢ / Σ count``: ``mean = agg(meanᵢ)``, ``var = agg(varᵢ + (meanᵢ - mean)²) · N/(N-1)``. The extra statistics round after the last update (Alg. 1,
t = T + 1) applies Eq. 8 alone, so the output statistics belong to the final weights.

Ablations of Table 6: ``stats_source: moving_average`` (1) uploads BN-style running averages of
the batch statistics after training (no separate pass, no extra round); ``aggregation:
weighted_average`` (2) averages means and variances with the algorithm's client weights;
``mixing`` (3–5) is ``global_only``, ``batch_only`` or ``fixed`` (1:1) instead of ``learned``.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Iterator, Optional

import torch
from torch import nn

from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.packing import PackedLayer, register_packing_rule
from fedbn_bench.core.updates import LayerStatistics, State, Statistics
from fedbn_bench.errors import ConfigError
from fedbn_bench.norms.base import NORMS, NormConfig, NormMethod, stacked

STATS_FORWARD = ("global", "hybrid")
STATS_SOURCES = ("separated", "moving_average")
AGGREGATIONS = ("unbiased", "weighted_average")
MIXINGS = ("learned", "global_only", "batch_only", "fixed")
FIXED_GLOBAL_WEIGHT = {"global_only": 1.0, "batch_only": 0.0, "fixed": 0.5}


@dataclass
class HBNConfig(NormConfig):
    name: str = "hbn"
    lam: float = 0.01
    eps: float = 1e-5
    affine: bool = True
    mixing: str = "learned"
    stats_source: str = "separated"
    stats_forward: str = "global"
    stats_samples: int = 0
    stats_batch_size: int = 1024
    aggregation: str = "unbiased"
    ma_momentum: float = 0.1


class Moments:
    """Per-channel count, mean and sum of squared deviations of a layer's input: each chunk's
    moments are merged in float64 by the pairwise update of Chan et al. (1979), so chunking does
    not change the result beyond rounding."""

    def __init__(self) -> None:
        self.count = 0
        self.mean: Optional[torch.Tensor] = None
        self.m2: Optional[torch.Tensor] = None

    def add(self, x: torch.Tensor) -> None:
        dims = [0, *range(2, x.dim())]
        var, mean = torch.var_mean(x.detach(), dims, correction=0)
        n = x.numel() // x.shape[1]
        mean, m2 = mean.to(torch.float64), var.to(torch.float64) * n
        if self.mean is None:
            self.count, self.mean, self.m2 = n, mean, m2
            return
        total = self.count + n
        delta = mean - self.mean
        self.mean = self.mean + delta * (n / total)
        self.m2 = self.m2 + m2 + delta.square() * (self.count * n / total)
        self.count = total

    @property
    def var(self) -> torch.Tensor:
        """Biased variance (1/n), the client statistic of App. A.2."""
        return self.m2 / self.count


def global_weight(hybrid_factor: Optional[torch.Tensor], mixing: str) -> torch.Tensor | float:
    """Weight ``w`` of the global statistics in Eq. 9: ``sigmoid(hybrid_factor)`` when the factor
    is learned, else the fixed weight of ``mixing``."""
    if hybrid_factor is not None:
        return torch.sigmoid(hybrid_factor)
    return FIXED_GLOBAL_WEIGHT[mixing]


def mix_with_batch(x: torch.Tensor, global_mean: torch.Tensor, global_var: torch.Tensor,
                   w: torch.Tensor | float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 9: the batch mean and biased variance of ``x`` (over every axis but the channels)
    mixed with the global statistics, ``w`` being the weight of the global ones."""
    dims = [0, *range(2, x.dim())]
    mean = (1 - w) * x.mean(dims) + w * global_mean
    var = (1 - w) * x.var(dims, unbiased=False) + w * global_var
    return mean, var


def normalize(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, weight: Optional[torch.Tensor],
              bias: Optional[torch.Tensor], eps: float) -> torch.Tensor:
    """Eq. 10 plus the affine map: ``x`` standardized per channel with ``mean`` and ``var``."""
    shape = (1, -1) + (1,) * (x.dim() - 2)
    out = (x - mean.reshape(shape)) * torch.rsqrt(var.reshape(shape) + eps)
    if weight is not None:
        out = out * weight.reshape(shape) + bias.reshape(shape)
    return out


@torch.no_grad()
def update_moving_average(running_mean: torch.Tensor, running_var: torch.Tensor, x: torch.Tensor, m: float) -> None:
    """Table 6 ablation (1), in place: BN-style running averages of the batch mean and (unbiased)
    variance per channel of ``x`` (one client, or packed clients' channels)."""
    dims = [0, *range(2, x.dim())]
    running_mean.mul_(1 - m).add_(m * x.mean(dims))
    running_var.mul_(1 - m).add_(m * x.var(dims))


class HybridBatchNorm(nn.Module):
    """The HBN layer (Eq. 9–10) for (N, C) or (N, C, *) inputs.

    ``mixing`` fixes the weight ``w`` of the global statistics: ``sigmoid(hybrid_factor)`` when
    ``learned``, else 1, 0 or 0.5. ``ma_momentum`` (Table 6 ablation 1 only) keeps non-persistent
    running averages of the batch statistics during training.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        affine: bool = True,
        mixing: str = "learned",
        ma_momentum: Optional[float] = None,
    ) -> None:
        super().__init__()
        self.num_features, self.eps, self.mixing, self.ma_momentum = num_features, eps, mixing, ma_momentum
        self.weight = nn.Parameter(torch.ones(num_features)) if affine else None
        self.bias = nn.Parameter(torch.zeros(num_features)) if affine else None
        self.hybrid_factor = nn.Parameter(torch.zeros(num_features)) if mixing == "learned" else None
        self.register_buffer("global_mean", torch.zeros(num_features))
        self.register_buffer("global_var", torch.ones(num_features))
        if ma_momentum is not None:
            self.register_buffer("running_mean", torch.zeros(num_features), persistent=False)
            self.register_buffer("running_var", torch.ones(num_features), persistent=False)
        self.positions = 1
        self.recorder: Optional[Moments] = None
        self.pass_rule: Optional[str] = None

    def global_weight(self) -> torch.Tensor | float:
        """Weight ``w`` of the global statistics in Eq. 9 (``1 / (1 + e^-alpha)``)."""
        return global_weight(self.hybrid_factor, self.mixing)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.recorder is not None:
            self.recorder.add(x)
        self.positions = math.prod(x.shape[2:])
        use_batch = self.training if self.pass_rule is None else self.pass_rule == "hybrid"
        if use_batch:
            mean, var = mix_with_batch(x, self.global_mean, self.global_var, self.global_weight())
            if self.ma_momentum is not None and self.training and self.pass_rule is None:
                update_moving_average(self.running_mean, self.running_var, x, self.ma_momentum)
        else:
            mean, var = self.global_mean, self.global_var
        return normalize(x, mean, var, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, mixing={self.mixing}, affine={self.weight is not None}"


@register_packing_rule(HybridBatchNorm)
class PackedHybridBatchNorm(PackedLayer):
    """HBN's layer in local training (Eq. 9-10) over ``n * C`` packed channels: each channel mixes
    its own client's batch moments with its client's global statistics. (The statistics pass
    runs on the model itself, never on the packed copy.)"""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.source
        s.positions = math.prod(x.shape[2:])
        mean, var = self.flat("global_mean"), self.flat("global_var")
        if self.training:
            mean, var = mix_with_batch(x, mean, var, global_weight(self.flat("hybrid_factor"), s.mixing))
            if s.ma_momentum is not None:
                update_moving_average(self.flat("running_mean"), self.flat("running_var"), x, s.ma_momentum)
        return normalize(x, mean, var, self.flat("weight"), self.flat("bias"), s.eps)


@contextlib.contextmanager
def statistics_pass(model: nn.Module, layers: dict[str, HybridBatchNorm], rule: str) -> Iterator[dict[str, Moments]]:
    """Record the input moments of ``layers`` while their normalization follows ``rule``; the
    model is in eval mode (no dropout) and its train/eval mode is restored afterwards."""
    was_training = model.training
    recorders = {name: Moments() for name in layers}
    model.eval()
    for name, layer in layers.items():
        layer.recorder, layer.pass_rule = recorders[name], rule
    try:
        yield recorders
    finally:
        for layer in layers.values():
            layer.recorder, layer.pass_rule = None, None
        model.train(was_training)


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"norm.{key}='{value}' is unknown; allowed: {', '.join(allowed)}")


def validate_hbn(cfg: HBNConfig) -> None:
    """Raise ``ConfigError`` naming the first invalid HBN option."""
    _choice("mixing", cfg.mixing, MIXINGS)
    _choice("stats_source", cfg.stats_source, STATS_SOURCES)
    _choice("stats_forward", cfg.stats_forward, STATS_FORWARD)
    _choice("aggregation", cfg.aggregation, AGGREGATIONS)
    checks = [
        (0 < cfg.lam <= 1, f"norm.lam={cfg.lam} is invalid: λ of HBN Eq. 11 must be in (0, 1]"),
        (cfg.eps > 0, f"norm.eps={cfg.eps} is invalid: must be > 0"),
        (cfg.stats_samples >= 0, f"norm.stats_samples={cfg.stats_samples} is invalid: 0 (all data) or a count > 0"),
        (cfg.stats_batch_size >= 1, f"norm.stats_batch_size={cfg.stats_batch_size} is invalid: must be >= 1"),
        (0 < cfg.ma_momentum <= 1, f"norm.ma_momentum={cfg.ma_momentum} is invalid: must be in (0, 1]"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)


@NORMS.register("hbn")
class HybridBN(NormMethod):
    config_class = HBNConfig
    layer_types = (HybridBatchNorm,)
    local_state_in_evaluation = False

    uses_batch_statistics = True

    def __init__(self, cfg: HBNConfig) -> None:
        super().__init__(cfg)
        validate_hbn(cfg)
        self.separated = cfg.stats_source == "separated"
        self.final_statistics_round = self.separated
        self.statistics_only = False

    # 1. Layer rule ------------------------------------------------------------------------
    def norm_layer(self, num_features: int, dims: int) -> nn.Module:
        c = self.cfg
        momentum = None if self.separated else c.ma_momentum
        return HybridBatchNorm(num_features, eps=c.eps, affine=c.affine, mixing=c.mixing, ma_momentum=momentum)

    # 2. Client statistics -------------------------------------------------------------------
    def local_keys(self, model: nn.Module) -> list[str]:
        """The hybrid factors: each client's own, never communicated (§3.3)."""
        return [f"{name}.hybrid_factor" for name, m in self.norm_modules(model).items() if m.hybrid_factor is not None]

    @torch.no_grad()
    def before_local_training(self, model: nn.Module, x: torch.Tensor) -> Optional[Statistics]:
        """Eq. 7: the moments of every HBN layer's input on ``x`` under the received weights
        (Table 6 ablation 1 instead starts its running averages from the global statistics)."""
        layers = self.norm_modules(model)
        if not self.separated:
            for layer in layers.values():
                layer.running_mean.copy_(layer.global_mean)
                layer.running_var.copy_(layer.global_var)
            return None
        if self.cfg.stats_samples:
            x = x[: self.cfg.stats_samples]
        chunk = len(x) if self.cfg.stats_forward == "hybrid" else self.cfg.stats_batch_size
        with statistics_pass(model, layers, self.cfg.stats_forward) as recorders:
            for start in range(0, len(x), chunk):
                model(x[start : start + chunk])
        return {name: layer_statistics(layer, recorders[name].mean, recorders[name].var, recorders[name].count)
                for name, layer in layers.items()}

    def client_statistics(self, model: nn.Module, num_samples: int) -> Statistics:
        """Table 6 ablation (1): the running averages kept during training, uploaded after it."""
        return {name: layer_statistics(layer, layer.running_mean, layer.running_var, num_samples * layer.positions)
                for name, layer in self.norm_modules(model).items()}

    # 3. Server aggregation ------------------------------------------------------------------
    def aggregate_statistics(self, stats: list[Statistics], weights: torch.Tensor, aggregator: Aggregator,
                             global_state: State) -> State:
        """Eq. 8 (or the weighted average), then Eq. 11 with λ (λ = 1 in the statistics round)."""
        lam = 1.0 if self.statistics_only else self.cfg.lam
        out = {}
        for name in stats[0] if stats else ():
            means, variances = stacked(stats, name, "mean"), stacked(stats, name, "var")
            if self.cfg.aggregation == "unbiased":
                counts = stacked(stats, name, "count")
                total = counts.sum()
                w = counts / total
                mean = aggregator(means, w)
                var = aggregator(variances + (means - mean).square(), w) * (total / (total - 1).clamp_min(1))
            else:
                mean, var = aggregator(means, weights), aggregator(variances, weights)
            for key, value in ((f"{name}.global_mean", mean), (f"{name}.global_var", var)):
                previous = global_state[key]
                out[key] = ((1 - lam) * previous.to(torch.float64) + lam * value).to(previous.dtype)
        return out

    # Lifecycle --------------------------------------------------------------------------------
    def on_round_start(self, round_idx: int, total_rounds: int, model: nn.Module) -> None:
        """Round ``total_rounds`` is Alg. 1's statistics-only round t = T + 1 (Eq. 8 alone)."""
        self.statistics_only = round_idx >= total_rounds


def layer_statistics(layer: HybridBatchNorm, mean: torch.Tensor, var: torch.Tensor, count: int) -> LayerStatistics:
    """One layer's upload: its moments (in the layer's dtype) and the number of values they summarize."""
    ref = layer.global_mean
    return LayerStatistics(mean.to(ref.dtype).clone(), var.to(ref.dtype).clone(),
                           torch.tensor(float(count), dtype=torch.float64, device=ref.device))
