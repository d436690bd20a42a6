"""Hybrid Batch Normalisation (HBN; hbn_hybrid_batch_normalisation.txt §3, Alg. 1).

Layer rule (Eq. 9–10): in training a layer normalizes with a per-channel mix of the batch
statistics (Eq. 1) and the frozen global statistics, ``mu = (1 - w) mu_b + w mu_g`` (same for the
variance) with ``w = sigmoid(alpha)``; the hybrid factor ``alpha`` is learned, initialised to 0
(``w = 0.5``), kept by each client and never communicated (§3.3, Alg. 1 input). Evaluation uses
the global statistics only (§3.3, last paragraph).

Client statistics (Eq. 7, Alg. 1 "without backpropagation"). The paper: before training, a client
computes the mean and (biased, App. A.2) variance of every HBN layer's input on its data under the
received global weights, ``S(w_g; D_k)``. Our reading (``stats_forward: sequential``, default):
the statistics must be those of the network that is evaluated with them, so a layer's input is
recorded while every earlier layer already normalizes with the *new* global statistics. The pass
therefore runs layer by layer, in forward order (``statistics_stages``): the clients record one
layer, the server aggregates it (Eq. 8, 11), the next layer is recorded under it. At λ = 1 the
evaluated network then sees at every layer exactly the union statistics it normalizes with
(tested on ResNet-20). ``stats_forward: global`` records every layer in one pass while earlier
layers still normalize with the *previous* global statistics (self-consistent only for the first
layer; on ResNet-20 it can collapse the evaluated network, fidelity audit §11).

Server aggregation: the unbiased pooled mean and variance of Eq. 8, weighted by the number of
values each client's moments summarize (``count: values``: samples × spatial positions, so a conv
layer's Eq. 8 is exactly the unbiased variance over all values of the union), then smoothed with
the previous global statistics (Eq. 11, ``lam``: 0.01 in §4.1). Eq. 8 goes through the run's
aggregator with weights ``countᵢ / Σ count``: ``mean = agg(meanᵢ)``, ``var = agg(varᵢ + (meanᵢ -
mean)²) · N/(N-1)``. Statistics re-estimated for testing (§4.1) and the statistics round after
the last update (Alg. 1, t = T + 1) use λ = 1 (``fresh_statistics``).

``variant: code`` reproduces the authors' HybridBN code (``FedHBN/clients.py``, ``MyBNtool.py``,
``server.py``) where it differs from the paper; each difference is also its own key, whose
``null`` means "the variant's value":

=================  ==================  ===========================================================
key                paper (default)     code
=================  ==================  ===========================================================
``lam``            0.01 (§4.1)         0.002 in training rounds (``avg_momentum=0.002``)
``stats_forward``  sequential          hybrid: one train-mode pass, earlier layers mix batch and
                                       global statistics with the client's factor
``stats_record``   raw input moments   mixed: the layer's Eq. 9 moments ``(1-w) mu_b + w mu_g``
``stats_samples``  0 (all local data)  64 (one batch of the client's first 64 samples)
``stats_draw``     random (§5), drawn  first: the client's first ``stats_samples`` samples
                   per round, client
``count``          values              images (Eq. 8's N counts samples)
``factor_start``   zero (α = 0)        server_average: α is also averaged by the server, and a
                                       client takes that average until its first participation
=================  ==================  ===========================================================

Ablations of Table 6: ``stats_source: moving_average`` (1) uploads BN-style running averages of
the batch statistics (biased variance, as Eq. 8 expects) after training (no separate pass, no
extra round); ``aggregation: weighted_average`` (2) averages means and variances with the
algorithm's client weights; ``mixing`` (3–5) is ``global_only``, ``batch_only`` or ``fixed`` (1:1)
instead of ``learned``.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, fields
from typing import Iterator, Optional

import torch
from torch import nn

from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.packing import PackedLayer, register_packing_rule
from fedbn_bench.core.updates import LayerStatistics, State, Statistics
from fedbn_bench.errors import ConfigError
from fedbn_bench.norms.base import NORMS, NormConfig, NormMethod, stacked

VARIANTS = ("paper", "code")
STATS_FORWARD = ("sequential", "global", "hybrid")
STATS_RECORD = ("raw", "mixed")
STATS_SOURCES = ("separated", "moving_average")
AGGREGATIONS = ("unbiased", "weighted_average")
MIXINGS = ("learned", "global_only", "batch_only", "fixed")
COUNTS = ("values", "images")
FACTOR_STARTS = ("zero", "server_average")
STATS_DRAWS = ("random", "first")
FIXED_GLOBAL_WEIGHT = {"global_only": 1.0, "batch_only": 0.0, "fixed": 0.5}


@dataclass(frozen=True)
class HBNSettings:
    """The choices where the paper and the authors' code differ (module docstring table)."""

    lam: float
    stats_forward: str
    stats_record: str
    stats_samples: int
    stats_draw: str
    count: str
    factor_start: str


VARIANT_SETTINGS = {
    "paper": HBNSettings(lam=0.01, stats_forward="sequential", stats_record="raw", stats_samples=0,
                         stats_draw="random", count="values", factor_start="zero"),
    "code": HBNSettings(lam=0.002, stats_forward="hybrid", stats_record="mixed", stats_samples=64,
                        stats_draw="first", count="images", factor_start="server_average"),
}


@dataclass
class HBNConfig(NormConfig):
    name: str = "hbn"
    variant: str = "paper"
    lam: Optional[float] = None
    eps: float = 1e-5
    affine: bool = True
    mixing: str = "learned"
    stats_source: str = "separated"
    stats_forward: Optional[str] = None
    stats_record: Optional[str] = None
    stats_samples: Optional[int] = None
    stats_draw: Optional[str] = None
    stats_batch_size: int = 1024
    count: Optional[str] = None
    factor_start: Optional[str] = None
    aggregation: str = "unbiased"
    ma_momentum: float = 0.1


def resolve_settings(cfg: HBNConfig) -> HBNSettings:
    """The variant's settings, with every key the config sets (not ``null``) taking precedence."""
    _choice("variant", cfg.variant, VARIANTS)
    base = VARIANT_SETTINGS[cfg.variant]
    values = {f.name: getattr(cfg, f.name) for f in fields(HBNSettings)}
    return HBNSettings(**{k: getattr(base, k) if v is None else v for k, v in values.items()})


class StopPass(Exception):
    """Raised by the last layer a statistics pass records, to skip the rest of the forward."""


class Moments:
    """Per-channel moments of a layer's input: each chunk's moments are merged in float64 by the
    pairwise update of Chan et al. (1979), so chunking does not change the result beyond
    rounding; ``values`` and ``samples`` count what they summarize."""

    def __init__(self) -> None:
        self.values = 0
        self.samples = 0
        self.mean: Optional[torch.Tensor] = None
        self.m2: Optional[torch.Tensor] = None

    def add(self, x: torch.Tensor) -> None:
        """The moments of ``x`` (over every axis but the channels)."""
        dims = [0, *range(2, x.dim())]
        var, mean = torch.var_mean(x.detach(), dims, correction=0)
        self.add_moments(mean, var, x.numel() // x.shape[1], x.shape[0])

    def add_moments(self, mean: torch.Tensor, var: torch.Tensor, values: int, samples: int) -> None:
        """Moments computed elsewhere (``mean``, biased ``var`` over ``values`` values)."""
        mean, m2 = mean.detach().to(torch.float64), var.detach().to(torch.float64) * values
        self.samples += samples
        if self.mean is None:
            self.values, self.mean, self.m2 = values, mean, m2
            return
        total = self.values + values
        delta = mean - self.mean
        self.mean = self.mean + delta * (values / total)
        self.m2 = self.m2 + m2 + delta.square() * (self.values * values / total)
        self.values = total

    @property
    def var(self) -> torch.Tensor:
        """Biased variance (1/n), the client statistic of App. A.2."""
        return self.m2 / self.values


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
    """Table 6 ablation (1), in place: BN-style running averages of the batch mean and *biased*
    variance per channel of ``x`` (one client, or packed clients' channels): Eq. 8, which pools
    them, expects biased client variances."""
    dims = [0, *range(2, x.dim())]
    running_mean.mul_(1 - m).add_(m * x.mean(dims))
    running_var.mul_(1 - m).add_(m * x.var(dims, unbiased=False))


@dataclass
class PassState:
    """A statistics pass in progress, shared by the model's HBN layers: how every layer normalizes
    (``rule``: ``global`` or ``hybrid``), what the recording layers keep (``record``), their
    recorders, and how many of them are still to record in the current forward."""

    rule: str
    record: str
    recorders: dict[str, Moments]
    remaining: int = 0


class HybridBatchNorm(nn.Module):
    """The HBN layer (Eq. 9–10) for (N, C) or (N, C, *) inputs.

    ``mixing`` fixes the weight ``w`` of the global statistics: ``sigmoid(hybrid_factor)`` when
    ``learned``, else 1, 0 or 0.5. ``ma_momentum`` (Table 6 ablation 1 only) keeps non-persistent
    running averages of the batch statistics during training, restarted from the global statistics
    whenever those are received (loaded).
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
        self.pass_state: Optional[PassState] = None
        self.layer_name = ""

    def global_weight(self) -> torch.Tensor | float:
        """Weight ``w`` of the global statistics in Eq. 9 (``1 / (1 + e^-alpha)``)."""
        return global_weight(self.hybrid_factor, self.mixing)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        if self.ma_momentum is not None and prefix + "global_mean" in state_dict:
            with torch.no_grad():
                self.running_mean.copy_(self.global_mean)
                self.running_var.copy_(self.global_var)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.positions = math.prod(x.shape[2:])
        if self.pass_state is not None:
            return self._statistics_forward(x, self.pass_state)
        if self.training:
            mean, var = mix_with_batch(x, self.global_mean, self.global_var, self.global_weight())
            if self.ma_momentum is not None:
                update_moving_average(self.running_mean, self.running_var, x, self.ma_momentum)
        else:
            mean, var = self.global_mean, self.global_var
        return normalize(x, mean, var, self.weight, self.bias, self.eps)

    def _statistics_forward(self, x: torch.Tensor, state: PassState) -> torch.Tensor:
        if state.rule == "hybrid":
            mean, var = mix_with_batch(x, self.global_mean, self.global_var, self.global_weight())
        else:
            mean, var = self.global_mean, self.global_var
        recorder = state.recorders.get(self.layer_name)
        if recorder is not None:
            if state.record == "mixed":
                recorder.add_moments(mean, var, x.numel() // x.shape[1], x.shape[0])
            else:
                recorder.add(x)
            state.remaining -= 1
            if state.remaining == 0:
                raise StopPass
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
def statistics_pass(model: nn.Module, layers: dict[str, HybridBatchNorm], record: list[str], rule: str,
                    kind: str) -> Iterator[PassState]:
    """Run forwards in which ``layers`` normalize by ``rule`` and the layers named in ``record``
    keep their input moments (``kind``: raw or mixed); the model is in eval mode (no dropout) and
    its mode is restored afterwards."""
    was_training = model.training
    state = PassState(rule, kind, {name: Moments() for name in record})
    model.eval()
    for name, layer in layers.items():
        layer.pass_state, layer.layer_name = state, name
    try:
        yield state
    finally:
        for layer in layers.values():
            layer.pass_state = None
        model.train(was_training)


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"norm.{key}='{value}' is unknown; allowed: {', '.join(allowed)}")


def validate_hbn(cfg: HBNConfig, settings: HBNSettings) -> None:
    """Raise ``ConfigError`` naming the first invalid HBN option."""
    _choice("mixing", cfg.mixing, MIXINGS)
    _choice("stats_source", cfg.stats_source, STATS_SOURCES)
    _choice("aggregation", cfg.aggregation, AGGREGATIONS)
    _choice("stats_forward", settings.stats_forward, STATS_FORWARD)
    _choice("stats_record", settings.stats_record, STATS_RECORD)
    _choice("stats_draw", settings.stats_draw, STATS_DRAWS)
    _choice("count", settings.count, COUNTS)
    _choice("factor_start", settings.factor_start, FACTOR_STARTS)
    checks = [
        (0 < settings.lam <= 1, f"norm.lam={settings.lam} is invalid: λ of HBN Eq. 11 must be in (0, 1]"),
        (cfg.eps > 0, f"norm.eps={cfg.eps} is invalid: must be > 0"),
        (settings.stats_samples >= 0,
         f"norm.stats_samples={settings.stats_samples} is invalid: 0 (all data) or a count > 0"),
        (cfg.stats_batch_size >= 1, f"norm.stats_batch_size={cfg.stats_batch_size} is invalid: must be >= 1"),
        (0 < cfg.ma_momentum <= 1, f"norm.ma_momentum={cfg.ma_momentum} is invalid: must be in (0, 1]"),
        (settings.stats_record == "raw" or settings.stats_forward == "hybrid",
         "norm.stats_record='mixed' needs norm.stats_forward='hybrid' (mixed moments exist in training mode only)"),
        (settings.factor_start == "zero" or cfg.mixing == "learned",
         f"norm.factor_start='{settings.factor_start}' needs norm.mixing='learned' (no factor otherwise)"),
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
        self.settings = resolve_settings(cfg)
        validate_hbn(cfg, self.settings)
        self.separated = cfg.stats_source == "separated"
        self.final_statistics_round = self.separated
        self.statistics_before_training = self.separated
        self.shares_local_keys = self.settings.factor_start == "server_average"
        self.fresh = False

    # 1. Layer rule ------------------------------------------------------------------------
    def norm_layer(self, num_features: int, dims: int) -> nn.Module:
        c = self.cfg
        momentum = None if self.separated else c.ma_momentum
        return HybridBatchNorm(num_features, eps=c.eps, affine=c.affine, mixing=c.mixing, ma_momentum=momentum)

    # 2. Client statistics -------------------------------------------------------------------
    def local_keys(self, model: nn.Module) -> list[str]:
        """The hybrid factors: each client's own, never communicated (§3.3)."""
        return [f"{name}.hybrid_factor" for name, m in self.norm_modules(model).items() if m.hybrid_factor is not None]

    def statistics_stages(self, model: nn.Module, x: torch.Tensor) -> list[list[str]]:
        """One stage per layer in forward order (``sequential``), else one stage of every layer."""
        layers = self.norm_modules(model)
        if self.settings.stats_forward != "sequential":
            return [list(layers)]
        order: list[str] = []
        with statistics_pass(model, layers, [], "global", "raw"), torch.no_grad():
            handles = [m.register_forward_pre_hook(lambda mod, inp, name=n: order.append(name))
                       for n, m in layers.items()]
            try:
                model(x[:2])
            finally:
                for h in handles:
                    h.remove()
        return [[name] for name in dict.fromkeys(order)]

    def statistics_inputs(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Eq. 7's samples: all of ``x``, or ``stats_samples`` of them (§5: "128 randomly sampled
        images"; ``stats_draw: first`` takes the first ones, as the authors' code)."""
        n = self.settings.stats_samples
        if not n or n >= len(x):
            return x
        if self.settings.stats_draw == "first":
            return x[:n]
        return x[torch.randperm(len(x), generator=generator, device=generator.device)[:n].to(x.device)]

    @torch.no_grad()
    def pass_statistics(self, model: nn.Module, x: torch.Tensor, layers: list[str]) -> Statistics:
        """Eq. 7 for ``layers``: the moments of their inputs on ``x`` under the loaded weights and
        statistics; the forward stops after the last of them."""
        st = self.settings
        chunk = len(x) if st.stats_forward == "hybrid" else self.cfg.stats_batch_size
        modules = self.norm_modules(model)
        rule = "hybrid" if st.stats_forward == "hybrid" else "global"
        with statistics_pass(model, modules, layers, rule, st.stats_record) as state:
            for start in range(0, len(x), chunk):
                state.remaining = len(layers)
                try:
                    model(x[start : start + chunk])
                except StopPass:
                    pass
        return {name: self.moments_upload(modules[name], state.recorders[name]) for name in layers}

    def moments_upload(self, layer: HybridBatchNorm, moments: Moments) -> LayerStatistics:
        """One layer's upload: its moments (in the layer's dtype) and what Eq. 8's N counts."""
        count = moments.values if self.settings.count == "values" else moments.samples
        return layer_statistics(layer, moments.mean, moments.var, count)

    def client_statistics(self, model: nn.Module, num_samples: int) -> Statistics:
        """Table 6 ablation (1): the running averages kept during training, uploaded after it
        (nothing with the separated pass: its statistics come from ``pass_statistics``)."""
        if self.separated:
            return {}
        return {name: layer_statistics(layer, layer.running_mean, layer.running_var, num_samples * layer.positions)
                for name, layer in self.norm_modules(model).items()}

    # 3. Server aggregation ------------------------------------------------------------------
    def aggregate_statistics(self, stats: list[Statistics], weights: torch.Tensor, aggregator: Aggregator,
                             global_state: State) -> State:
        """Eq. 8 (or the weighted average), then Eq. 11 with λ (λ = 1 for fresh statistics)."""
        lam = 1.0 if self.fresh else self.settings.lam
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

    @contextlib.contextmanager
    def fresh_statistics(self) -> Iterator[None]:
        """Aggregate with λ = 1: the statistics round t = T + 1 (Alg. 1) and the re-estimation
        before each test (§4.1)."""
        self.fresh = True
        try:
            yield
        finally:
            self.fresh = False


def layer_statistics(layer: HybridBatchNorm, mean: torch.Tensor, var: torch.Tensor, count: int) -> LayerStatistics:
    """One layer's upload: its moments (in the layer's dtype) and the number of values they summarize."""
    ref = layer.global_mean
    return LayerStatistics(mean.to(ref.dtype).clone(), var.to(ref.dtype).clone(),
                           torch.tensor(float(count), dtype=torch.float64, device=ref.device))
