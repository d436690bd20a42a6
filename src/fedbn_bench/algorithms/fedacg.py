"""FedACG (Kim, Kim, Han 2024, "Communication-Efficient Federated Learning with Accelerated Client
Gradient", CVPR, Alg. 1): server momentum, a look-ahead broadcast and a proximal client term.

Round t: the server broadcasts the look-ahead ``θ_{t−1} + λ m_{t−1}``; each client trains from it
with the extra loss ``β/2 ‖θ − (θ_{t−1} + λ m_{t−1})‖²`` (gradient ``β (θ − θ_lookahead)``, Alg. 1's
client step; added before clipping as FedProx's, ``fedprox.py``); the server takes ``Δ_t``
= the aggregate of the uploads minus the look-ahead, ``m_t = λ m_{t−1} + Δ_t`` and
``θ_t = θ_{t−1} + m_t`` (so ``θ_t`` is the aggregate itself and ``m_t = θ_t − θ_{t−1}``). Alg. 1
averages ``Δ`` with 1/|S_t|; here the run's aggregator and weights are used, as for FedAvg
(data-size weights by default). ``m`` holds only the uploaded keys (never those a norm keeps
local) and starts at zero. Defaults ``λ = 0.85``, ``β = 1e-3``: the authors' setting (their code's
``server.momentum`` and ``prox_loss.weight``); HBN Table 4 does not give them.

Differences from the authors' code (github.com/geehokim/FedACG), as options or documented:

* ``proximal``: the code's client loss adds ``weight · Σ (θ − θ_lookahead)²`` without the ½, so its
  weight 1e-3 pulls with ``2e-3 (θ − θ_lookahead)``, twice the paper's ``β (θ − θ_lookahead)`` at the
  same number. ``proximal: half_squared`` (default) is the paper's ``β/2 ‖·‖²``;
  ``proximal: squared`` is the code's ``β ‖·‖²`` (gradient ``2β (θ − θ_lookahead)``). The paper is
  not in ``shared/papers`` and the stored copies searchable here hold only its abstract, so the ½
  (Alg. 1's client gradient ``β (θ − θ_lookahead)``) is not re-checked against a stored text.
* BN running statistics: the code adds ``λ m`` to, and keeps momentum on, every ``state_dict``
  entry, running statistics included when its BatchNorm variant is used (its default ResNet-18
  uses GroupNorm, which has none). Here look-ahead and momentum act on the learnable weights
  only; running statistics are the norm method's and are aggregated by it (``norms/``) as under
  FedAvg.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from fedbn_bench.algorithms.base import ALGORITHMS, AlgoConfig, Algorithm, LocalTree
from fedbn_bench.algorithms.fedprox import add_proximal_gradient, start_anchor
from fedbn_bench.core.aggregation import Aggregator, aggregate_states
from fedbn_bench.core.updates import ClientUpdate, State
from fedbn_bench.errors import ConfigError


@dataclass
class FedACGConfig(AlgoConfig):
    name: str = "fedacg"
    lam: float = 0.85
    beta: float = 0.001
    proximal: str = "half_squared"


PROXIMAL = ("half_squared", "squared")
"""``half_squared``: ``β/2 ‖θ − θ_lookahead‖²`` (the paper); ``squared``: ``β ‖θ − θ_lookahead‖²`` (the code)."""


@ALGORITHMS.register("fedacg")
class FedACG(Algorithm):
    config_class = FedACGConfig

    def __init__(self, cfg: FedACGConfig) -> None:
        super().__init__(cfg)
        if not 0 <= cfg.lam < 1:
            raise ConfigError(f"algo.lam={cfg.lam} is invalid: the server momentum λ is in [0, 1)")
        if not cfg.beta >= 0:
            raise ConfigError(f"algo.beta={cfg.beta} is invalid: the proximal weight β is >= 0")
        if cfg.proximal not in PROXIMAL:
            raise ConfigError(f"algo.proximal='{cfg.proximal}' is unknown; allowed: {', '.join(PROXIMAL)}")
        self.global_momentum: State = {}

    def broadcast(self, global_state: State, client: int) -> State:
        """The look-ahead model ``θ_{t−1} + λ m_{t−1}`` (the global state where ``m`` has no key)."""
        lam = self.cfg.lam
        return {**global_state, **{k: global_state[k] + lam * m for k, m in self.global_momentum.items()}}

    def start(self, params: State, client_state: dict[str, Any]) -> LocalTree:
        shared = {k: p for k, p in params.items() if k not in self.local_keys}
        return {**super().start(params, client_state), **start_anchor(shared)}

    def gradient_hook(self, grads: State, params: State, local: LocalTree) -> State:
        """The proximal gradient ``β (θ − θ_lookahead)`` (``2β`` with ``proximal: squared``), then
        the base class's clipping of the total."""
        weight = self.cfg.beta if self.cfg.proximal == "half_squared" else 2 * self.cfg.beta
        grads = add_proximal_gradient(grads, params, local, weight, squared=True)
        return super().gradient_hook(grads, params, local)

    def server_update(self, global_state: State, updates: list[ClientUpdate], weights: torch.Tensor,
                      aggregator: Aggregator, lr: float) -> State:
        """``m_t = λ m_{t−1} + Δ_t`` and ``θ_t = θ_{t−1} + m_t`` on the uploaded keys."""
        lam, momentum = self.cfg.lam, self.global_momentum
        lookahead = self.broadcast(global_state, -1)
        aggregate = aggregate_states(aggregator, [u.weights for u in updates], weights)
        self.global_momentum = {k: (lam * momentum[k] if k in momentum else 0) + (a - lookahead[k])
                                for k, a in aggregate.items()}
        return {k: global_state[k] + m for k, m in self.global_momentum.items()}
