"""SCAFFOLD, Karimireddy et al. 2020 (ICML), Alg. 1 with option II control variates.

* Server control variate ``c`` (``self.c``, on the algorithm object, so checkpoints hold it) and
  each client's ``c_i`` (its own state across rounds, ``finish``'s client state), both zero before
  their first update and defined only on the uploaded keys: ``c`` is built from the uploads'
  ``extras["control"]``, from which the engine removes every key a norm keeps local.
* The client learns ``c`` in ``start`` by reading ``self.c``: broadcast runs in the same process,
  and ``broadcast``'s state is loaded into the model, so it cannot carry extra tensors.
* Local step (Alg. 1 line 10): ``y ← y − η_l (g − c_i + c)``. ``gradient_hook`` first applies the
  base class's clipping to the stochastic gradient ``g``, then adds ``c − c_i``, so the control
  variates enter unclipped. SGD momentum and weight decay, if set, act on the corrected gradient.
* After ``K`` steps (line 12, option II): ``c_i⁺ = c_i − c + (x − y) / (K η_l)``; ``K η_l`` is the
  sum of the client's step sizes (a per-client scalar in the local tree), ``K η_l`` for a round's
  constant lr. Upload (line 13): ``Δy = y − x`` as the weights, ``Δc = c_i⁺ − c_i`` as
  ``extras["control"]``. With SGD momentum ``β`` (not in Alg. 1; HBN's setting uses 0.9) a step
  moves the model about ``1/(1 − β)`` times farther, so ``step_sum: effective`` (default) sums
  ``η_l/(1 − β)`` and the estimate stays the mean gradient; ``step_sum: plain`` sums ``η_l``, the
  literal formula, which overestimates ``c_i`` ~``1/(1 − β)``-fold (measured: HBN Table 4's reduced
  setting, momentum 0.9, fell from 57 % to 10 % within 10 rounds). Both agree at ``β = 0``.
* Server (lines 16-17): ``x ← x + η_g Σ_i w_i Δy_i`` and ``c ← c + (|S|/N) Σ_i w_i Δc_i``, both
  through the run's aggregator. Alg. 1's uniform ``w_i = 1/|S|`` is the default
  (``weighting: uniform``); ``weighting: size`` uses data-size weights ``n_i / Σ_S n_j`` in both
  sums instead (then ``c`` is no longer the mean of the ``c_i``). A norm may still override the
  weights (``NormMethod.client_weights``). ``N`` is ``num_clients`` (the run's total number of
  clients), ``|S|`` the round's participants.

Keys a norm keeps local (``Algorithm.local_keys``) have no control variates: their local steps are
plain SGD, and neither ``c`` nor any ``c_i`` holds them.
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

WEIGHTINGS = ("uniform", "size")
STEP_SUMS = ("effective", "plain")


@dataclass
class ScaffoldConfig(AlgoConfig):
    name: str = "scaffold"
    server_lr: float = 1.0
    weighting: str = "uniform"
    num_clients: int = 10
    step_sum: str = "effective"


@ALGORITHMS.register("scaffold")
class Scaffold(Algorithm):
    config_class = ScaffoldConfig
    uploads_weights = False
    local_steps_read_server_state = True
    """The local steps add the server's control variate ``c`` (``gradient_hook``)."""

    def __init__(self, cfg: ScaffoldConfig) -> None:
        super().__init__(cfg)
        if cfg.weighting not in WEIGHTINGS:
            raise ConfigError(f"algo.weighting='{cfg.weighting}' is unknown; allowed: {', '.join(WEIGHTINGS)}")
        if cfg.step_sum not in STEP_SUMS:
            raise ConfigError(f"algo.step_sum='{cfg.step_sum}' is unknown; allowed: {', '.join(STEP_SUMS)}")
        if not cfg.server_lr > 0:
            raise ConfigError(f"algo.server_lr={cfg.server_lr} is invalid: the global step size η_g must be > 0")
        if cfg.num_clients < 1:
            raise ConfigError(f"algo.num_clients={cfg.num_clients} is invalid: the total number of clients N must be >= 1")
        self.c: State = {}

    def client_weights(self, sizes: torch.Tensor) -> torch.Tensor:
        """Alg. 1's uniform ``1/|S|`` (default) or the data-size weights (``weighting: size``)."""
        if self.cfg.weighting == "uniform":
            return torch.full((len(sizes),), 1.0 / len(sizes), device=sizes.device)
        return super().client_weights(sizes)

    def start(self, params: State, client_state: dict[str, Any]) -> LocalTree:
        """The base tree plus the anchor ``x``, the client's ``c_i`` (zero at first) and the sum of
        its step sizes, on the parameters the norm shares."""
        keys = [k for k in params if k not in self.local_keys]
        own = client_state.get("control", {})
        control = {k: own[k].clone() if k in own else torch.zeros_like(params[k]) for k in keys}
        anchor = {k: params[k].clone() for k in keys}
        step_sizes = torch.zeros((), dtype=params[keys[0]].dtype, device=params[keys[0]].device)
        return {**super().start(params, client_state), "anchor": anchor, "control": control, "step_sizes": step_sizes}

    def gradient_hook(self, grads: State, params: State, local: LocalTree) -> State:
        """``g − c_i + c`` (Alg. 1 line 10), ``g`` clipped first by the base class."""
        grads = super().gradient_hook(grads, params, local)
        control = local["control"]
        out = {}
        for k, g in grads.items():
            if k in control:
                g = g - control[k]
                if k in self.c:
                    g = g + self.c[k]
            out[k] = g
        return out

    def step(self, params: State, grads: State, local: LocalTree, lr: float) -> None:
        super().step(params, grads, local, lr)
        momentum = self.cfg.momentum if self.cfg.step_sum == "effective" else 0.0
        local["step_sizes"].add_(lr / (1 - momentum))

    def finish(self, params: State, local: LocalTree) -> tuple[State, dict[str, State], dict[str, Any]]:
        """``Δy = y − x`` as the upload, ``Δc = c_i⁺ − c_i`` as ``extras["control"]`` and ``c_i⁺``
        (option II) as the client's state (Alg. 1 lines 12-13)."""
        anchor, control, step_sizes = local["anchor"], local["control"], local["step_sizes"]
        delta_y: State = {}
        delta_c: State = {}
        new_control: State = {}
        for k, x in anchor.items():
            y = params[k]
            c_i = control[k]
            c_i_new = (c_i - self.c[k] if k in self.c else c_i) + (x - y) / per_client(step_sizes, x)
            delta_y[k] = y - x
            delta_c[k] = c_i_new - c_i
            new_control[k] = c_i_new
        return delta_y, {"control": delta_c}, {"control": new_control}

    def server_update(self, global_state: State, updates: list[ClientUpdate], weights: torch.Tensor,
                      aggregator: Aggregator, lr: float) -> State:
        """``x ← x + η_g Σ w_i Δy_i``, ``c ← c + (|S|/N) Σ w_i Δc_i`` (Alg. 1 lines 16-17)."""
        delta_y = aggregate_states(aggregator, [u.weights for u in updates], weights)
        delta_c = aggregate_states(aggregator, [u.extras["control"] for u in updates], weights)
        share = len(updates) / self.cfg.num_clients
        self.c = {k: self.c[k] + share * d if k in self.c else share * d for k, d in delta_c.items()}
        return {k: global_state[k] + self.cfg.server_lr * d for k, d in delta_y.items()}
