"""The FL-algorithm strategy: what a client starts from, its local update, and the server update.

Algorithms are orthogonal to normalization methods: a norm decides what happens to statistics
and normalization state, an algorithm what happens to the learnable weights. A new algorithm is
one module registering a subclass of ``Algorithm`` in ``ALGORITHMS`` plus one YAML in conf/algo.

The client update is written once, FL-bench/FedJAX style, as hooks over *per-client trees*
(dicts of tensors, ``core/trees.py``) that the engine's backends drive (``engine/local_steps.py``):

* ``prepare_model(model)``, once: an algorithm's own layers (MOON's projection head, FedWon's
  weight-standardized convolutions);
* ``start(params, client_state)`` -> the client's local tree (optimizer buffers, anchors, ...);
* per step: ``local_gradients`` (default: the backend's forward/backward with ``loss`` once;
  SAM: twice), then ``gradient_hook`` and ``step``;
* ``finish(params, local)`` -> the upload, namespaced extras and the client's new own state.

``loss``, ``gradient_hook``, ``step`` and ``finish`` receive either one client's tensors
(``engine=loop``) or stacks with a leading client axis (``vmap``, ``packed``), so they must be
element-wise or reduce over the last axes only (``core.trees.per_client`` expands a per-client
scalar). ``start`` always sees one client. An algorithm whose loss needs more than the logits
overrides ``model_loss`` (the model itself, ``loop`` only); one whose client update cannot be
written on stacks sets ``stacked_unsupported`` to the reason, and runs on ``loop`` only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn

from fedbn_bench.algorithms.schedules import ScheduleConfig
from fedbn_bench.algorithms.sgd import sgd_step
from fedbn_bench.core.aggregation import Aggregator, aggregate_states
from fedbn_bench.core.trees import per_client, total_norm
from fedbn_bench.core.updates import ClientUpdate, State
from fedbn_bench.errors import ConfigError
from fedbn_bench.registry import Registry

LocalTree = dict[str, Any]
"""A client's local tree during training (tensors or dicts of tensors)."""
Gradients = Callable[..., tuple[State, torch.Tensor]]
"""``compute(params, update_statistics=True) -> (grads, losses)``: the backend's forward and
backward of the step's batch at ``params``; ``update_statistics=False`` leaves every buffer as it was."""


@dataclass
class AlgoConfig:
    name: str = "fedavg"
    lr: float = 0.05
    momentum: float = 0.0
    weight_decay: float = 0.0
    local_epochs: int = 1
    local_steps: Optional[int] = None
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    momentum_carry: str = "none"
    clip_grad_norm: Optional[float] = None


MOMENTUM_CARRY = ("none", "local", "global")


class Algorithm:
    """Base class; the default behaviour is FedAvg's (McMahan et al. 2017): local SGD with
    momentum and weight decay, weights averaged with the clients' data-size weights."""

    config_class: type = AlgoConfig
    keeps_models_local: bool = False
    local_keys: frozenset[str] = frozenset()
    """The keys the norm keeps on each client (set by the engine): never in an algorithm's proximal
    anchors, control variates or server state."""
    pools_clients: bool = False
    pools_by_client: bool = False
    """With ``pools_clients``: each batch of the pooled client is the union of one batch per
    original client (``engine.sampling.draw_union_batches``) instead of a uniform draw."""
    stacked_unsupported: Optional[str] = None
    """Why the stacked backends (vmap, packed) cannot run this algorithm's client update."""
    uploads_weights: bool = True
    """Whether a client's ``weights`` upload is its new weights (FedAvg) rather than an update
    (DSGD's gradient, SCAFFOLD's Δy): an attack on weights then acts on the change."""

    @property
    def local_steps_read_server_state(self) -> bool:
        """Whether the client's local steps read server state kept on this object (then runs
        with their own algorithm objects cannot share one backend, ``engine/replicas.py``):
        ``momentum_carry=global`` starts from the server's momentum."""
        return self.momentum_carry == "global"

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        self.momentum_carry = carry = getattr(cfg, "momentum_carry", "none")
        if carry not in MOMENTUM_CARRY:
            raise ConfigError(f"algo.momentum_carry='{carry}' is unknown; allowed: {', '.join(MOMENTUM_CARRY)}")
        if carry != "none" and not cfg.momentum:
            raise ConfigError(f"algo.momentum_carry='{carry}' needs SGD momentum: set algo.momentum > 0")
        check_local_work(cfg)
        self.clip_grad_norm: Optional[float] = getattr(cfg, "clip_grad_norm", None)
        if self.clip_grad_norm is not None and not self.clip_grad_norm > 0:
            raise ConfigError(f"algo.clip_grad_norm={self.clip_grad_norm} is invalid: "
                              "a norm > 0, or null for no clipping")
        self.server_momentum: State = {}

    # -- the round's shape ---------------------------------------------------------------------
    def batch_size(self, batch_size: int, clients_per_round: int) -> int:
        """The local batch size given the run's ``batch_size``."""
        return batch_size

    def num_steps(self, client_size: int, batch_size: int) -> int:
        """Local steps of a client per round: ``local_steps`` or ``local_epochs`` full epochs."""
        if self.cfg.local_steps is not None:
            return self.cfg.local_steps
        return self.cfg.local_epochs * (client_size // batch_size)

    def client_weights(self, sizes: torch.Tensor) -> torch.Tensor:
        """Aggregation weights of the sampled clients: proportional to their data size."""
        sizes = sizes.to(torch.float64)
        return (sizes / sizes.sum()).to(torch.float32)

    def broadcast(self, global_state: State, client: int) -> State:
        """What ``client`` starts local training from (default: the global state itself)."""
        return global_state

    def prepare_model(self, model: nn.Module) -> nn.Module:
        """Adapt the model built with the norm's layers (default: unchanged)."""
        return model

    # -- the client update (one client or a stack) --------------------------------------------
    def model_loss(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, local: LocalTree) -> torch.Tensor:
        """One client's loss on its batch with the model itself (``engine=loop``): ``loss`` of its
        logits. An override that needs more than the logits sets ``stacked_unsupported``."""
        return self.loss(model(x), y)

    def local_gradients(self, compute: Gradients, params: State, local: LocalTree) -> tuple[State, torch.Tensor]:
        """The step's raw gradients and losses (default: one forward/backward at ``params``)."""
        return compute(params)

    def loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Each client's mean loss on its batch: logits ``(..., B, K)``, labels ``(..., B)``."""
        per_sample = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
        return per_sample.view(y.shape).mean(-1)

    def start(self, params: State, client_state: dict[str, Any]) -> LocalTree:
        """The local tree of one client starting from ``params`` (its received weights; never
        modify or alias them). FedAvg: SGD momentum buffers, zero or carried (``momentum_carry``,
        FixBN App. C.4: ``local`` keeps each client's buffers across rounds, ``global`` starts
        from the server's average of the previous round's final buffers, Eq. 2); with clipping,
        ``grad_norm``, the client's last gradient norm before clipping."""
        local: LocalTree = {}
        if self.clip_grad_norm is not None:
            local["grad_norm"] = torch.zeros((), device=next(iter(params.values())).device)
        if not self.cfg.momentum:
            return local
        carried = client_state.get("momentum", {}) if self.momentum_carry == "local" else self.server_momentum
        if self.momentum_carry == "none":
            carried = {}
        local["momentum"] = {k: carried[k].clone() if k in carried else torch.zeros_like(p) for k, p in params.items()}
        return local

    def gradient_hook(self, grads: State, params: State, local: LocalTree) -> State:
        """The gradients the step uses: clipped to ``clip_grad_norm`` (HBN's code, every client:
        ``clip_grad_norm_(max_norm=10)``); subclasses (FedProx's proximal term) extend it."""
        if self.clip_grad_norm is None:
            return grads
        return clip_by_total_norm(grads, self.clip_grad_norm, local["grad_norm"])

    def step(self, params: State, grads: State, local: LocalTree, lr: float) -> None:
        """One local step, in place (torch.optim.SGD's rule, ``algorithms/sgd.py``)."""
        sgd_step(params, grads, local.get("momentum"), lr, self.cfg.momentum, self.cfg.weight_decay)

    def finish(self, params: State, local: LocalTree) -> tuple[State, dict[str, State], dict[str, Any]]:
        """``(upload, extras, client_state)`` after the last step: the new weights; the momentum
        buffers as ``extras["momentum"]`` (``global`` carry) or kept as the client's state (``local``)."""
        upload = {k: p.clone() for k, p in params.items()}
        if self.momentum_carry == "global":
            return upload, {"momentum": local["momentum"]}, {}
        if self.momentum_carry == "local":
            return upload, {}, {"momentum": local["momentum"]}
        return upload, {}, {}

    # -- the server ----------------------------------------------------------------------------
    def server_update(self, global_state: State, updates: list[ClientUpdate], weights: torch.Tensor,
                      aggregator: Aggregator, lr: float) -> State:
        """New global weights from the round's updates (FedAvg: their aggregate); with
        ``momentum_carry=global`` the uploaded buffers become the next round's start."""
        if self.momentum_carry == "global":
            self.server_momentum = aggregate_states(aggregator, [u.extras["momentum"] for u in updates], weights)
        return aggregate_states(aggregator, [u.weights for u in updates], weights)


def check_local_work(cfg: Any) -> None:
    """Refuse local work that trains nothing or makes no sense: ``local_epochs`` and ``local_steps``
    (when set) >= 1, SGD ``momentum`` in [0, 1), ``weight_decay`` >= 0 (a key the config lacks takes
    ``AlgoConfig``'s default)."""
    epochs, steps = getattr(cfg, "local_epochs", 1), getattr(cfg, "local_steps", None)
    momentum, decay = getattr(cfg, "momentum", 0.0), getattr(cfg, "weight_decay", 0.0)
    checks = [
        (epochs >= 1, f"algo.local_epochs={epochs} is invalid: each sampled client trains >= 1 epoch "
                      "(or set algo.local_steps)"),
        (steps is None or steps >= 1,
         f"algo.local_steps={steps} is invalid: >= 1 step, or null for algo.local_epochs epochs"),
        (0 <= momentum < 1, f"algo.momentum={momentum} is invalid: SGD momentum is in [0, 1)"),
        (decay >= 0, f"algo.weight_decay={decay} is invalid: must be >= 0"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)


def clip_by_total_norm(grads: State, max_norm: float, norm_out: torch.Tensor) -> State:
    """``torch.nn.utils.clip_grad_norm_`` per client: each client's gradients scaled by
    ``min(1, max_norm / (‖g‖₂ + 1e-6))``, ``‖g‖₂`` over all its tensors, written to ``norm_out``
    (shape ``()`` for one client, ``(n,)`` for a stack, which tells the two apart). The gradients
    are the step's own (fresh from autograd or from an earlier hook) and are scaled in place, in
    one ``foreach`` operation (the scale shaped once per number of axes)."""
    total = total_norm(grads, norm_out.dim()) if grads else torch.zeros_like(norm_out)
    norm_out.copy_(total)
    scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
    values = list(grads.values())
    shaped = {dim: per_client(scale, g) for dim, g in {g.dim(): g for g in values}.items()}
    if values:
        torch._foreach_mul_(values, [shaped[g.dim()] for g in values])
    return grads


ALGORITHMS: Registry[type[Algorithm]] = Registry("algorithm")
