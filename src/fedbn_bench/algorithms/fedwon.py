"""FedWon (Zhuang & Lyu 2024, "FedWon: Triumphing Multi-domain Federated Learning Without
Normalization", ICLR, §3): FedAvg with every convolution reparameterized by scaled weight
standardization and local training with adaptive gradient clipping; run with ``norm=none``
(FedWon proper) or with a norm method (HBN Table 4's "FedWon + HBN").

* **Scaled weight standardization** (Brock et al. 2021a, ICLR, §4; NF-Nets): each output unit's
  kernel ``W_i`` (fan-in ``N``) is used as ``Ŵ_i = g_i γ (W_i − mean W_i) / sqrt(max(N var W_i, ε))``,
  ``g_i`` a learnable gain (initially 1), ``γ = sqrt(2 / (1 − 1/π))`` the ReLU constant, ``ε = 1e-4``.
  ``prepare_model`` swaps every ``nn.Conv2d`` for ``ScaledWSConv2d`` (same weights, new gain).
* **Adaptive gradient clipping** (Brock et al. 2021b, ICML, §4.1): per unit ``i`` of every
  parameter (a row of a weight, the whole of a vector), ``G_i ← λ max(‖W_i‖, 1e-3) G_i / ‖G_i‖``
  where ``‖G_i‖ / max(‖W_i‖, 1e-3) > λ``; the classifier ``head`` is not clipped (``agc_skip_head``,
  NF-Nets' rule). Applied to the loss gradient before the base class's norm clipping (off here).
* Default ``λ = agc_clip = 0.01``, NF-Nets' value; FedWon's own value is not in ``shared/papers``
  (its small-batch experiments may need a larger λ: it is an option).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from fedbn_bench.algorithms.base import ALGORITHMS, AlgoConfig, Algorithm, LocalTree
from fedbn_bench.core.packing import PackedLayer, register_packing_rule
from fedbn_bench.core.updates import State
from fedbn_bench.errors import ConfigError

RELU_GAMMA = math.sqrt(2.0 / (1.0 - 1.0 / math.pi))


@dataclass
class FedWonConfig(AlgoConfig):
    name: str = "fedwon"
    agc_clip: float = 0.01
    agc_eps: float = 1e-3
    agc_skip_head: bool = True
    ws_gamma: float = RELU_GAMMA
    ws_eps: float = 1e-4


def standardize(weight: torch.Tensor, gain: torch.Tensor, gamma: float, eps: float) -> torch.Tensor:
    """Scaled weight standardization over the last three axes (one output unit's kernel)."""
    fan_in = weight.shape[-3:].numel()
    mean = weight.mean(dim=(-3, -2, -1), keepdim=True)
    var = weight.var(dim=(-3, -2, -1), unbiased=False, keepdim=True)
    return (weight - mean) * (gain * gamma * torch.rsqrt((var * fan_in).clamp(min=eps)))


class ScaledWSConv2d(nn.Conv2d):
    """``nn.Conv2d`` whose kernel is used scaled-weight-standardized, with a per-unit ``gain``."""

    def __init__(self, conv: nn.Conv2d, gamma: float, eps: float) -> None:
        super().__init__(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                         conv.dilation, conv.groups, conv.bias is not None, conv.padding_mode,
                         device=conv.weight.device, dtype=conv.weight.dtype)
        with torch.no_grad():
            self.weight.copy_(conv.weight)
            if conv.bias is not None:
                self.bias.copy_(conv.bias)
        self.gain = nn.Parameter(torch.ones(conv.out_channels, 1, 1, 1, device=conv.weight.device,
                                            dtype=conv.weight.dtype))
        self.gamma, self.eps = gamma, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(x, standardize(self.weight, self.gain, self.gamma, self.eps), self.bias)


@register_packing_rule(ScaledWSConv2d)
class PackedScaledWSConv2d(PackedLayer):
    """``n`` clients' ``ScaledWSConv2d`` as one grouped convolution (standardized per client and unit)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.source
        w = standardize(self.weight, self.gain, s.gamma, s.eps)
        return F.conv2d(x, w.reshape(-1, *w.shape[2:]), self.flat("bias"), s.stride, s.padding, s.dilation,
                        s.groups * w.shape[0])


def standardize_convolutions(model: nn.Module, gamma: float, eps: float) -> nn.Module:
    """``model`` with every plain ``nn.Conv2d`` replaced by a ``ScaledWSConv2d``, in place."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Conv2d:
                setattr(parent, name, ScaledWSConv2d(child, gamma, eps))
    return model


def unitwise_norm(t: torch.Tensor, lead: int) -> torch.Tensor:
    """Norms of ``t``'s units, broadcastable against it: rows (all axes after the first) of a
    weight, the whole tensor for a vector; ``lead`` leading client axes are kept apart."""
    if t.dim() - lead <= 1:
        dims = tuple(range(lead, t.dim()))
    else:
        dims = tuple(range(lead + 1, t.dim()))
    return torch.linalg.vector_norm(t, dim=dims, keepdim=True) if dims else t.abs()


def adaptive_clip(grads: State, params: State, clip: float, eps: float, lead: int, skip: tuple[str, ...] = ()) -> State:
    """AGC (Brock et al. 2021b, Eq. 3) on every key not starting with one of ``skip``."""
    out = {}
    for k, g in grads.items():
        if k.startswith(skip):
            out[k] = g
            continue
        max_norm = unitwise_norm(params[k], lead).clamp(min=eps) * clip
        g_norm = unitwise_norm(g, lead)
        clipped = g * (max_norm / g_norm.clamp(min=1e-6))
        out[k] = torch.where(g_norm > max_norm, clipped, g)
    return out


@ALGORITHMS.register("fedwon")
class FedWon(Algorithm):
    config_class = FedWonConfig

    def __init__(self, cfg: FedWonConfig) -> None:
        super().__init__(cfg)
        if not cfg.agc_clip > 0:
            raise ConfigError(f"algo.agc_clip={cfg.agc_clip} is invalid: the AGC threshold λ is > 0")
        for key in ("agc_eps", "ws_gamma", "ws_eps"):
            if not getattr(cfg, key) > 0:
                raise ConfigError(f"algo.{key}={getattr(cfg, key)} is invalid: must be > 0 (FedWon's defaults: "
                                  "agc_eps 1e-3, ws_gamma the ReLU gain, ws_eps 1e-4)")
        self.skip = ("head.",) if cfg.agc_skip_head else ()

    def prepare_model(self, model: nn.Module) -> nn.Module:
        return standardize_convolutions(model, self.cfg.ws_gamma, self.cfg.ws_eps)

    def start(self, params: State, client_state: dict[str, Any]) -> LocalTree:
        device = next(iter(params.values())).device
        return {**super().start(params, client_state), "agc_lead": torch.zeros((), device=device)}

    def gradient_hook(self, grads: State, params: State, local: LocalTree) -> State:
        grads = adaptive_clip(grads, params, self.cfg.agc_clip, self.cfg.agc_eps, local["agc_lead"].dim(), self.skip)
        return super().gradient_hook(grads, params, local)
