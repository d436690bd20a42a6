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
values each client's moments summarize (carried in the payload as ``<layer>.count``: samples x
spatial positions, so a conv layer's Eq. 8 is exactly the unbiased variance over all values of the
union; the authors' code counts images), then smoothed with the previous global statistics
(Eq. 11, ``lam``; 0.01 in §4.1). The extra statistics round after the last update (Alg. 1,
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

from fedbn_bench.errors import ConfigError
from fedbn_bench.norms.base import NORMS, NormConfig, NormMethod

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
                dims = [0, *range(2, x.dim())]
                self.update_running(x.mean(dims).detach(), x.var(dims).detach())
        else:
            mean, var = self.global_mean, self.global_var
        return normalize(x, mean, var, self.weight, self.bias, self.eps)

    @torch.no_grad()
    def update_running(self, mean: torch.Tensor, var: torch.Tensor) -> None:
        m = self.ma_momentum
        self.running_mean.mul_(1 - m).add_(m * mean)
        self.running_var.mul_(1 - m).add_(m * var)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, mixing={self.mixing}, affine={self.weight is not None}"


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

    def __init__(self, cfg: HBNConfig) -> None:
        super().__init__(cfg)
        validate_hbn(cfg)
        self.separated = cfg.stats_source == "separated"
        self.final_statistics_round = self.separated
        self.statistics_only = False
        self.client_size = 0

    # 1. Layer rule ------------------------------------------------------------------------
    def norm_layer(self, num_features: int, dims: int) -> nn.Module:
        c = self.cfg
        momentum = None if self.separated else c.ma_momentum
        return HybridBatchNorm(num_features, eps=c.eps, affine=c.affine, mixing=c.mixing, ma_momentum=momentum)

    # 2. Client statistics -------------------------------------------------------------------
    def statistic_keys(self, model: nn.Module) -> list[str]:
        return [f"{name}.{stat}" for name in self.norm_modules(model) for stat in ("global_mean", "global_var")]

    def local_keys(self, model: nn.Module) -> list[str]:
        """The hybrid factors: each client's own, never communicated (§3.3)."""
        return [f"{name}.hybrid_factor" for name, m in self.norm_modules(model).items() if m.hybrid_factor is not None]

    @torch.no_grad()
    def before_local_training(self, model: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor] | None:
        """Eq. 7: the moments of every HBN layer's input on ``x`` under the received weights."""
        layers = self.norm_modules(model)
        if not self.separated:
            self.client_size = len(x)
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
        out: dict[str, torch.Tensor] = {}
        for name, layer in layers.items():
            moments = recorders[name]
            out.update(self.payload(name, layer, moments.mean, moments.var, moments.count))
        return out

    def client_statistics(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """Table 6 ablation (1): the running averages kept during training, uploaded after it."""
        out: dict[str, torch.Tensor] = {}
        for name, layer in self.norm_modules(model).items():
            count = self.client_size * layer.positions
            out.update(self.payload(name, layer, layer.running_mean, layer.running_var, count))
        return out

    @staticmethod
    def payload(
        name: str, layer: HybridBatchNorm, mean: torch.Tensor, var: torch.Tensor, count: int
    ) -> dict[str, torch.Tensor]:
        """One layer's upload: its moments and count, plus the global statistics it received
        (identical for every client; they let the server apply Eq. 11 from the payloads alone)."""
        ref = layer.global_mean
        return {
            f"{name}.global_mean": mean.to(ref.dtype).clone(),
            f"{name}.global_var": var.to(ref.dtype).clone(),
            f"{name}.count": torch.tensor(float(count), dtype=torch.float64, device=ref.device),
            f"{name}.received_mean": layer.global_mean.detach().clone(),
            f"{name}.received_var": layer.global_var.detach().clone(),
        }

    # 3. Server aggregation ------------------------------------------------------------------
    def aggregate_statistics(
        self, stats: list[dict[str, torch.Tensor]], weights: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """Eq. 8 (or the weighted average), then Eq. 11 with λ (λ = 1 in the statistics round)."""
        if not stats:
            return {}
        lam = 1.0 if self.statistics_only else self.cfg.lam
        names = [key[: -len(".count")] for key in stats[0] if key.endswith(".count")]
        out = {}
        for name in names:
            means = torch.stack([s[f"{name}.global_mean"] for s in stats]).to(torch.float64)
            variances = torch.stack([s[f"{name}.global_var"] for s in stats]).to(torch.float64)
            if self.cfg.aggregation == "unbiased":
                counts = torch.stack([s[f"{name}.count"] for s in stats]).to(means)[:, None]
                total = counts.sum()
                mean = (counts * means).sum(0) / total
                var = (counts * (variances + (means - mean).square())).sum(0) / (total - 1).clamp_min(1)
            else:
                w = weights.to(means)[:, None]
                mean, var = (w * means).sum(0), (w * variances).sum(0)
            dtype = stats[0][f"{name}.global_mean"].dtype
            prev_mean = stats[0][f"{name}.received_mean"].to(torch.float64)
            prev_var = stats[0][f"{name}.received_var"].to(torch.float64)
            out[f"{name}.global_mean"] = ((1 - lam) * prev_mean + lam * mean).to(dtype)
            out[f"{name}.global_var"] = ((1 - lam) * prev_var + lam * var).to(dtype)
        return out

    # Lifecycle --------------------------------------------------------------------------------
    def on_round_start(self, round_idx: int, total_rounds: int, model: nn.Module) -> None:
        """Round ``total_rounds`` is Alg. 1's statistics-only round t = T + 1 (Eq. 8 alone)."""
        self.statistics_only = round_idx >= total_rounds
