"""Distributed SGD, FBN App. B Alg. 3.

Each client computes one gradient on a batch of ``b`` at the broadcast weights (line 7) and sends
it; the server averages the clients' messages uniformly (line 10) and takes one step (line 11).
FBN App. C Table 2 lists a *client momentum* of 0.99; as in the robust-DSGD literature the paper
builds on, a client sends its momentum ``m ← β m + (1 − β) g`` (EMA form; ``β = 0`` sends the raw
gradient, exactly Alg. 3). The momentum starts at ``m₀ = 0`` (``momentum_start: zero``, the
convention of ByzFL, the FBN group's library), so the first message is ``(1 − β) g``;
``momentum_start: gradient`` makes the first message ``g`` instead. Weight decay is added to the
gradient on the client. The client's momentum is its own state across rounds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from fedbn_bench.algorithms.base import ALGORITHMS, AlgoConfig, Algorithm, LocalTree
from fedbn_bench.core.aggregation import Aggregator, aggregate_states
from fedbn_bench.core.trees import per_client
from fedbn_bench.core.updates import ClientUpdate, State
from fedbn_bench.errors import ConfigError


@dataclass
class DSGDConfig(AlgoConfig):
    name: str = "dsgd"
    client_momentum: float = 0.99
    momentum_start: str = "zero"


MOMENTUM_STARTS = ("zero", "gradient")


@ALGORITHMS.register("dsgd")
class DSGD(Algorithm):
    config_class = DSGDConfig
    uploads_weights = False

    def __init__(self, cfg: DSGDConfig) -> None:
        super().__init__(cfg)
        if cfg.momentum_start not in MOMENTUM_STARTS:
            raise ConfigError(f"algo.momentum_start='{cfg.momentum_start}' is unknown; "
                              f"allowed: {', '.join(MOMENTUM_STARTS)}")
        if not 0 <= cfg.client_momentum < 1:
            raise ConfigError(f"algo.client_momentum={cfg.client_momentum} is invalid: the clients' EMA momentum β "
                              "is in [0, 1) (FBN: 0.99)")

    def num_steps(self, client_size: int, batch_size: int) -> int:
        return 1

    def client_weights(self, sizes: torch.Tensor) -> torch.Tensor:
        return torch.full((len(sizes),), 1.0 / len(sizes), device=sizes.device)

    def start(self, params: State, client_state: dict[str, Any]) -> LocalTree:
        momentum = client_state.get("momentum", {})
        started = client_state.get("started", torch.zeros((), dtype=torch.bool, device=next(iter(params.values())).device))
        message = {k: momentum[k].clone() if k in momentum else torch.zeros_like(p) for k, p in params.items()}
        return {**super().start(params, {}), "message": message, "started": started.clone()}

    def step(self, params: State, grads: State, local: LocalTree, lr: float) -> None:
        """The client's message: its (momentum of the) decayed gradient; the weights stay."""
        beta, decay = self.cfg.client_momentum, self.cfg.weight_decay
        started = local["started"]
        from_zero = self.cfg.momentum_start == "zero"
        for k, p in params.items():
            g = grads[k] + decay * p if k in grads else torch.zeros_like(p)
            m = local["message"][k]
            if not beta:
                m.copy_(g)
            elif from_zero:
                m.mul_(beta).add_(g, alpha=1 - beta)
            else:
                m.copy_(torch.where(per_client(started, g), beta * m + (1 - beta) * g, g))
        started.fill_(True)

    def finish(self, params: State, local: LocalTree) -> tuple[State, dict[str, State], dict[str, Any]]:
        message = local["message"]
        keep = {"momentum": message, "started": local["started"]} if self.cfg.client_momentum else {}
        return {k: m.clone() for k, m in message.items()}, {}, keep

    def server_update(self, global_state: State, updates: list[ClientUpdate], weights: torch.Tensor,
                      aggregator: Aggregator, lr: float) -> State:
        gradient = aggregate_states(aggregator, [u.weights for u in updates], weights)
        return {k: global_state[k] - lr * gradient[k] for k in gradient}
