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
therefore runs in stages, one per layer in forward order: the clients record one layer, the server
aggregates it (Eq. 8, 11), the next layer is recorded under it. At λ = 1 the evaluated network then
sees at every layer exactly the union statistics it normalizes with (tested on ResNet-20).
``stats_forward: global`` records every layer in one stage while earlier layers still normalize
with the *previous* global statistics (self-consistent only for the first layer; on ResNet-20 it
can collapse the evaluated network, fidelity audit §11).

How the pass runs (``pass_statistics``). Both readings evaluate every layer with the global
statistics, so the network of the pass is the same for every client (they all receive the global
weights; the hybrid factor is unused in evaluation): one forward serves all clients, over their
samples concatenated in chunks of ``stats_batch_size``, each layer's input split back into the
clients' rows for their moments. That forward is paused before each HBN layer
(``layer_inputs.py``) until every chunk has reached it and the stage's statistics are
aggregated and loaded, so no layer runs twice (the chunks' activations at the paused layer are
held meanwhile). ``stats_forward: hybrid`` (the code's one train-mode batch) depends on each
client's batch and factor: one forward per client, one stage.

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
import itertools
import math
from dataclasses import dataclass, fields
from typing import Callable, Iterator, Optional

import torch
import torch.nn.functional as F
from torch import fx, nn

from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.packing import PackedLayer, register_packing_rule
from fedbn_bench.core.updates import LayerStatistics, State, Statistics
from fedbn_bench.errors import ConfigError
from fedbn_bench.norms.base import NORMS, NormConfig, NormMethod, stacked
from fedbn_bench.norms.layer_inputs import called_layers, layer_inputs, traced_graph

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
    stats_batch_size: int = 128
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
        mean, var = channel_moments(x.detach())
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


def channel_moments(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and biased variance of ``x`` (over every axis but the channels) in two
    passes, the mean and then the mean squared deviation from it: as accurate as Welford's update
    (``torch.var_mean``) and several times faster on the CPU."""
    dims = [0, *range(2, x.dim())]
    mean = x.mean(dims, keepdim=True)
    return mean.flatten(), (x - mean).square_().mean(dims)


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
    """Eq. 10 plus the affine map, ``x`` standardized per channel with ``mean`` and ``var``, as one
    multiply-add per value: ``x · s + (bias - mean · s)`` with ``s = weight / sqrt(var + eps)``
    (differentiable in ``mean`` and ``var``, which Eq. 9 mixes from the batch)."""
    scale = torch.rsqrt(var + eps)
    if weight is not None:
        scale = scale * weight
    shift = -mean * scale
    if bias is not None:
        shift = shift + bias
    shape = (1, -1) + (1,) * (x.dim() - 2)
    return torch.addcmul(shift.reshape(shape), x, scale.reshape(shape))


def normalize_fixed(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, weight: Optional[torch.Tensor],
                    bias: Optional[torch.Tensor], eps: float) -> torch.Tensor:
    """Eq. 10 plus the affine map with statistics that are not differentiated (the global ones in
    evaluation, §3.3; anything under ``no_grad``): torch's fused BatchNorm kernel."""
    return F.batch_norm(x, mean, var, weight, bias, False, 0.0, eps)


class HybridNorm(torch.autograd.Function):
    """Eq. 9-10 plus the affine map in training, with a backward written by hand around torch's
    fused BatchNorm kernels (``engine=packed``'s layer; several times faster on the CPU than
    autograd through the element-wise formula). Forward: the batch moments (two passes), their mix
    with the global statistics and the fused normalization. Backward: torch's BatchNorm backward
    for fixed statistics ``(mean, var)`` (the gradient of ``x``, ``weight`` and ``bias`` through
    the normalization), then the gradient through Eq. 9: ``dL/dmean = -g s Σ dy`` and
    ``dL/dvar = -½ g s² Σ dy x̂`` (``s = 1/sqrt(var + eps)``, ``x̂ = (x - mean) s``) reach ``x``
    through the batch moments (``1/M`` and ``2 (x - mean_b)/M`` per value) with weight ``1 - w``,
    and ``w`` as ``dL/dmean (mean_g - mean_b) + dL/dvar (var_g - var_b)``."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, global_mean: torch.Tensor, global_var: torch.Tensor, w: torch.Tensor | float,
                weight: Optional[torch.Tensor], bias: Optional[torch.Tensor], eps: float) -> torch.Tensor:
        batch_mean, batch_var = channel_moments(x)
        mean = (1 - w) * batch_mean + w * global_mean
        var = (1 - w) * batch_var + w * global_var
        gamma = torch.ones_like(mean) if weight is None else weight
        learned = isinstance(w, torch.Tensor)  # a fixed mixing's w stays a Python number: no host tensor per step
        ctx.save_for_backward(x, global_mean, global_var, gamma, batch_mean, batch_var, mean, var,
                              *((w,) if learned else ()))
        ctx.eps, ctx.affine, ctx.fixed_w = eps, (weight is not None, bias is not None), None if learned else w
        return normalize_fixed(x, mean, var, weight, bias, eps)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, global_mean, global_var, gamma, batch_mean, batch_var, mean, var, *learned = ctx.saved_tensors
        w = learned[0] if learned else ctx.fixed_w
        grad_x, grad_gamma, grad_beta = torch.ops.aten.native_batch_norm_backward(
            grad, x, gamma, mean, var, None, None, False, ctx.eps, [True, True, True])
        s = torch.rsqrt(var + ctx.eps)
        grad_mean = -gamma * s * grad_beta
        grad_var = -0.5 * gamma * s * s * grad_gamma
        values = x.numel() // x.shape[1]
        scale = 2 * (1 - w) * grad_var / values
        shift = (1 - w) * grad_mean / values - scale * batch_mean
        shape = (1, -1) + (1,) * (x.dim() - 2)
        grad_x.addcmul_(x, scale.reshape(shape)).add_(shift.reshape(shape))
        grad_w = grad_mean * (global_mean - batch_mean) + grad_var * (global_var - batch_var)
        has_weight, has_bias = ctx.affine
        return (grad_x, None, None, grad_w if ctx.needs_input_grad[3] else None,
                grad_gamma if has_weight else None, grad_beta if has_bias else None, None)


@torch.no_grad()
def update_moving_average(running_mean: torch.Tensor, running_var: torch.Tensor, x: torch.Tensor, m: float) -> None:
    """Table 6 ablation (1), in place: BN-style running averages of the batch mean and *biased*
    variance per channel of ``x`` (one client, or packed clients' channels): Eq. 8, which pools
    them, expects biased client variances."""
    dims = [0, *range(2, x.dim())]
    running_mean.mul_(1 - m).add_(m * x.mean(dims))
    running_var.mul_(1 - m).add_(m * x.var(dims, unbiased=False))


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
        if not self.training:
            return normalize_fixed(x, self.global_mean, self.global_var, self.weight, self.bias, self.eps)
        mean, var = mix_with_batch(x, self.global_mean, self.global_var, self.global_weight())
        if self.ma_momentum is not None:
            update_moving_average(self.running_mean, self.running_var, x, self.ma_momentum)
        return normalize(x, mean, var, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, mixing={self.mixing}, affine={self.weight is not None}"


@register_packing_rule(HybridBatchNorm)
class PackedHybridBatchNorm(PackedLayer):
    """HBN's layer in local training (Eq. 9-10) over ``n * C`` packed channels: each channel mixes
    its own client's batch moments with its client's global statistics, through ``HybridNorm``.
    (The layer's own forward differentiates the element-wise formula instead: functorch's ``vmap``
    has no batching rule for torch's BatchNorm backward with fixed statistics. The statistics pass
    runs on the model itself, never on the packed copy.)"""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.source
        s.positions = math.prod(x.shape[2:])
        mean, var, weight, bias = (self.flat(k) for k in ("global_mean", "global_var", "weight", "bias"))
        if not self.training:
            return normalize_fixed(x, mean, var, weight, bias, s.eps)
        if s.ma_momentum is not None:
            update_moving_average(self.flat("running_mean"), self.flat("running_var"), x, s.ma_momentum)
        return HybridNorm.apply(x, mean, var, global_weight(self.flat("hybrid_factor"), s.mixing), weight, bias, s.eps)


@contextlib.contextmanager
def pass_mode(model: nn.Module, layers: dict[str, HybridBatchNorm], hybrid: bool) -> Iterator[None]:
    """The model in eval mode for a statistics pass (no dropout), its HBN layers in training mode
    under the ``hybrid`` rule (Eq. 9 on the pass's batch); the model's mode restored afterwards."""
    was_training = model.training
    model.eval()
    for layer in layers.values():
        layer.train(hybrid)
    try:
        yield
    finally:
        model.train(was_training)


def client_rows(sizes: list[int], size: int) -> Iterator[tuple[slice, list[tuple[int, slice]]]]:
    """The clients' samples (``sizes[i]`` rows each, concatenated) in chunks of ``size`` rows:
    each chunk's rows, and for every client in it, the client's index and rows within the chunk."""
    bounds = list(itertools.accumulate(sizes, initial=0))
    for start in range(0, bounds[-1], size):
        stop = min(start + size, bounds[-1])
        yield slice(start, stop), [(i, slice(max(lo, start) - start, min(hi, stop) - start))
                                   for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])) if lo < stop and hi > start]


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
    def pass_statistics(self, model: nn.Module, inputs: list[torch.Tensor], load_client: Callable[[int], None],
                        aggregate: Callable[[list[Statistics]], None]) -> None:
        """Eq. 7 on every client's ``inputs[i]`` under the weights it received, in stages (module
        docstring): one forward for all clients under the global rule, one per client under the
        hybrid rule."""
        layers = self.norm_modules(model)
        hybrid = self.settings.stats_forward == "hybrid"
        with pass_mode(model, layers, hybrid):
            graph = traced_graph(model, self.layer_types)
            if hybrid:
                aggregate([self.client_pass(model, graph, x, load_client, i) for i, x in enumerate(inputs)])
            else:
                load_client(0)  # the same network for every client (module docstring)
                self.shared_pass(model, graph, inputs, aggregate)

    def client_pass(self, model: nn.Module, graph: fx.Graph, x: torch.Tensor, load_client: Callable[[int], None],
                    client: int) -> Statistics:
        """Client ``client``'s statistics of every layer on ``x``, one batch under its own state
        (the hybrid rule: Eq. 9 with its batch moments and factor)."""
        load_client(client)
        layers = self.norm_modules(model)
        uploads = {}
        for name, h in layer_inputs(model, graph, x, called_layers(graph, set(layers))):
            uploads[name] = self.moments_upload(layers[name], self.layer_moments(layers[name], h))
        return uploads

    def layer_moments(self, layer: HybridBatchNorm, x: torch.Tensor) -> Moments:
        """What a layer records of its input ``x``: its raw moments, or (``stats_record: mixed``)
        the Eq. 9 moments it normalizes with."""
        moments = Moments()
        if self.settings.stats_record == "mixed":
            moments.add_moments(*mix_with_batch(x, layer.global_mean, layer.global_var, layer.global_weight()),
                                x.numel() // x.shape[1], x.shape[0])
        else:
            moments.add(x)
        return moments

    def shared_pass(self, model: nn.Module, graph: fx.Graph, inputs: list[torch.Tensor],
                    aggregate: Callable[[list[Statistics]], None]) -> None:
        """The clients' raw moments under the global rule: one forward over their samples in
        chunks, paused before each layer; a stage per layer (``sequential``, each aggregated and
        loaded before the layer runs) or one stage of every layer (``global``)."""
        layers = self.norm_modules(model)
        order = called_layers(graph, set(layers))
        x = torch.cat(inputs)
        chunks = list(client_rows([len(v) for v in inputs], self.cfg.stats_batch_size))
        runs = [layer_inputs(model, graph, x[rows], order) for rows, _ in chunks]
        stages = [[name] for name in order] if self.settings.stats_forward == "sequential" else [order]
        for stage in stages:
            moments = {name: [Moments() for _ in inputs] for name in stage}
            for run, (_, clients) in zip(runs, chunks):
                for _ in stage:
                    name, h = next(run)
                    for i, rows in clients:
                        moments[name][i].add(h[rows])
            aggregate([{name: self.moments_upload(layers[name], moments[name][i]) for name in stage}
                       for i in range(len(inputs))])

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
