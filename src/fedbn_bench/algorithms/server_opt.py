"""Server optimizers on the pseudo-gradient: FedAvgM (Hsu et al. 2019) and FedAdagrad, FedYogi,
FedAdam (Reddi et al. 2021, "Adaptive Federated Optimization", Alg. 2).

Clients train exactly as FedAvg. The server forms the pseudo-gradient ``Δ = aggregate(x_i) − x``
through the run's aggregator (Alg. 2's mean of the client deltas, with the aggregator; since the
aggregation weights sum to one, the aggregate of the ``x_i`` minus ``x`` is the aggregate of the
client deltas ``Δ_i = x_i − x``) and applies its optimizer:

* FedAvgM:   ``v ← β v + Δ``,  ``x ← x + η v``  (server momentum β, server lr η; ``β = 0, η = 1``
  is FedAvg);
* Alg. 2:    ``m ← β1 m + (1 − β1) Δ``, then ``v`` by FedAdagrad ``v ← v + Δ²``, FedYogi
  ``v ← v − (1 − β2) Δ² sign(v − Δ²)`` or FedAdam ``v ← β2 v + (1 − β2) Δ²``, and
  ``x ← x + η m / (√v + τ)``; no bias
  correction (Alg. 2 has none); ``m₋₁ = 0``, ``v₋₁ = v_init`` (default τ², Alg. 2's
  initialisation ``v₋₁ ≥ τ²``).

Defaults: β1 = 0.9, β2 = 0.99 (Reddi et al.'s experiments, §5), τ = 1e-3 and η = 0.01 (both
tuned per task on a grid in Reddi et al., App. D; the HBN paper does not give its values);
FedAvgM: η = 1, β = 0.9 (Hsu et al. sweep both).

Which keys: only what the clients upload (``u.weights``: the model's parameters minus the keys a
norm keeps local, e.g. FedBN's BN, HBN's hybrid factors), so state exists only for those. Running
statistics never pass through here: they are the norm's ``aggregate_statistics`` (averaged as under
FedAvg), never stepped by the server optimizer (the HBN paper's text on Table 4 blames FedAdam's
crash with BN on its update conflicting with BN's statistics). Non-float uploaded entries keep
FedAvg's aggregate. The state (``velocity``; ``first_moment``, ``second_moment``) is a dict of tensors on the algorithm
object, so checkpoints hold it (``engine.checkpoint.plain_attributes``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from fedbn_bench.algorithms.base import ALGORITHMS, AlgoConfig, Algorithm
from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.updates import ClientUpdate, State
from fedbn_bench.errors import ConfigError


@dataclass
class FedAvgMConfig(AlgoConfig):
    name: str = "fedavgm"
    server_lr: float = 1.0
    server_momentum: float = 0.9


@dataclass
class FedAdagradConfig(AlgoConfig):
    name: str = "fedadagrad"
    server_lr: float = 0.01
    beta1: float = 0.9
    tau: float = 1e-3
    v_init: Optional[float] = None


@dataclass
class FedAdamConfig(FedAdagradConfig):
    name: str = "fedadam"
    beta2: float = 0.99


@dataclass
class FedYogiConfig(FedAdamConfig):
    name: str = "fedyogi"


def _check(condition: bool, key: str, value: object, rule: str) -> None:
    if not condition:
        raise ConfigError(f"algo.{key}={value} is invalid: {rule}")


class ServerOptimizer(Algorithm):
    """FedAvg's clients; the server steps ``x ← x + step(Δ)`` on each float key of the upload."""

    def __init__(self, cfg: AlgoConfig) -> None:
        super().__init__(cfg)
        _check(cfg.server_lr > 0, "server_lr", cfg.server_lr, "a server learning rate > 0")

    def server_update(self, global_state: State, updates: list[ClientUpdate], weights: torch.Tensor,
                      aggregator: Aggregator, lr: float) -> State:
        aggregate = super().server_update(global_state, updates, weights, aggregator, lr)
        return {k: global_state[k] + self.server_step(k, a - global_state[k]) if a.is_floating_point() else a
                for k, a in aggregate.items()}

    def server_step(self, key: str, delta: torch.Tensor) -> torch.Tensor:
        """The change of ``key`` given its pseudo-gradient ``delta``; updates the server state."""
        raise NotImplementedError


@ALGORITHMS.register("fedavgm")
class FedAvgM(ServerOptimizer):
    """Hsu et al. 2019: ``v ← β v + Δ``, ``x ← x + η v``."""

    config_class = FedAvgMConfig

    def __init__(self, cfg: FedAvgMConfig) -> None:
        super().__init__(cfg)
        beta = cfg.server_momentum
        _check(0 <= beta < 1, "server_momentum", beta, "must be in [0, 1)")
        self.velocity: State = {}

    def server_step(self, key: str, delta: torch.Tensor) -> torch.Tensor:
        v = self.velocity.get(key, torch.zeros_like(delta))
        self.velocity[key] = v = self.cfg.server_momentum * v + delta
        return self.cfg.server_lr * v


class AdaptiveServerOptimizer(ServerOptimizer):
    """Reddi et al. 2021 Alg. 2: ``m ← β1 m + (1 − β1) Δ``, ``v ← second_moment(v, Δ²)``,
    ``x ← x + η m / (√v + τ)``."""

    def __init__(self, cfg: FedAdagradConfig) -> None:
        super().__init__(cfg)
        _check(0 <= cfg.beta1 < 1, "beta1", cfg.beta1, "must be in [0, 1)")
        _check(cfg.tau > 0, "tau", cfg.tau, "the adaptivity τ must be > 0")
        beta2 = getattr(cfg, "beta2", 0.0)
        _check(0 <= beta2 < 1, "beta2", beta2, "must be in [0, 1)")
        self.v_init = cfg.tau ** 2 if cfg.v_init is None else cfg.v_init
        _check(self.v_init >= 0, "v_init", cfg.v_init, "the initial second moment must be >= 0 (null: τ²)")
        self.first_moment: State = {}
        self.second_moment: State = {}

    def server_step(self, key: str, delta: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        m = self.first_moment.get(key, torch.zeros_like(delta))
        v = self.second_moment.get(key, torch.full_like(delta, self.v_init))
        self.first_moment[key] = m = c.beta1 * m + (1 - c.beta1) * delta
        self.second_moment[key] = v = self.second_moment_step(v, delta.square())
        return c.server_lr * m / (v.sqrt() + c.tau)

    def second_moment_step(self, v: torch.Tensor, delta_sq: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


@ALGORITHMS.register("fedadagrad")
class FedAdagrad(AdaptiveServerOptimizer):
    """Reddi et al. Alg. 2, FedAdagrad: ``v ← v + Δ²``."""

    config_class = FedAdagradConfig

    def second_moment_step(self, v: torch.Tensor, delta_sq: torch.Tensor) -> torch.Tensor:
        return v + delta_sq


@ALGORITHMS.register("fedyogi")
class FedYogi(AdaptiveServerOptimizer):
    """Reddi et al. Alg. 2, FedYogi: ``v ← v − (1 − β2) Δ² sign(v − Δ²)``."""

    config_class = FedYogiConfig

    def second_moment_step(self, v: torch.Tensor, delta_sq: torch.Tensor) -> torch.Tensor:
        return v - (1 - self.cfg.beta2) * delta_sq * torch.sign(v - delta_sq)


@ALGORITHMS.register("fedadam")
class FedAdam(AdaptiveServerOptimizer):
    """Reddi et al. Alg. 2, FedAdam: ``v ← β2 v + (1 − β2) Δ²``."""

    config_class = FedAdamConfig

    def second_moment_step(self, v: torch.Tensor, delta_sq: torch.Tensor) -> torch.Tensor:
        return self.cfg.beta2 * v + (1 - self.cfg.beta2) * delta_sq
