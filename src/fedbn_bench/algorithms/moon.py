"""MOON (Li, He, Song 2021, "Model-Contrastive Federated Learning", CVPR, §3.2-3.3, Eq. 1-3, Alg. 1).

* **Network** (§3.2): base encoder, a projection head (two-layer MLP, ``projection_dim`` outputs;
  the paper's CIFAR setting is 256), then the output layer. ``prepare_model`` replaces the model's
  ``head`` by ``ProjectionHead`` (``projection_head: false`` keeps it and uses the penultimate
  features as the representation ``z``).
* **Local loss** (Eq. 3): ``ℓ_sup + μ ℓ_con`` with the model-contrastive loss (Eq. 2)
  ``ℓ_con = −log exp(sim(z, z_glob)/τ) / (exp(sim(z, z_glob)/τ) + exp(sim(z, z_prev)/τ))``, ``sim``
  the cosine similarity, ``z_glob`` from the model the client received (with its local keys) and
  ``z_prev`` from its own model at the end of its previous round. Both are computed without
  gradients in eval mode, as the MOON code runs them (no dropout, stored statistics), with the
  statistics and buffers the client received this round, taken before its first training forward
  moves them (the MOON code's global model keeps its own statistics as received), on private
  copies, so they never touch statistics or the random stream.
* **First round**: Alg. 1 takes ``z_prev`` from the client's model of its previous round, which a
  client does not have before its first round. The MOON code starts with an empty pool of previous
  models, so its round-0 logits hold only the positive pair and ``ℓ_con = −log 1 = 0``. Here
  likewise: a client with no previous model trains on ``ℓ_sup`` alone (no reference passes).
* **Differences from the MOON code** (github.com/QinbinLi/MOON): its pool copies every party's
  model after each round, so a party first sampled after round 0 contrasts with its own untrained
  initialization (here: ``ℓ_sup`` alone, as at round 0); its previous models keep their own
  running statistics (here: the received ones; the previous model's statistics are not kept).
* Defaults ``μ = 5``, ``τ = 0.5``: the paper's CIFAR-10 setting (§4.1); HBN Table 4 does not give them.

The previous model is each client's algorithm state (checkpointed). MOON runs the model three
times per step, so it runs on ``engine=loop`` only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from fedbn_bench.algorithms.base import ALGORITHMS, AlgoConfig, Algorithm, LocalTree
from fedbn_bench.core.updates import State
from fedbn_bench.errors import ConfigError


@dataclass
class MoonConfig(AlgoConfig):
    name: str = "moon"
    mu: float = 5.0
    tau: float = 0.5
    projection_head: bool = True
    projection_dim: int = 256


class ProjectionHead(nn.Module):
    """MOON's projection head and output layer: ``Linear(F, F) → ReLU → Linear(F, d)`` gives ``z``,
    ``Linear(d, K)`` the logits."""

    def __init__(self, in_features: int, projection_dim: int, num_classes: int) -> None:
        super().__init__()
        self.l1 = nn.Linear(in_features, in_features)
        self.l2 = nn.Linear(in_features, projection_dim)
        self.out = nn.Linear(projection_dim, num_classes)

    def project(self, h: torch.Tensor) -> torch.Tensor:
        return self.l2(F.relu(self.l1(h)))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.out(self.project(h))


class _Representation(nn.Module):
    """``z`` of ``model`` as a module's forward, so ``functional_call`` runs it with other weights."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return representation(self.model, self.model.forward_features(x))


def representation(model: nn.Module, features: torch.Tensor) -> torch.Tensor:
    """MOON's ``z``: the projection of the penultimate features, or the features themselves."""
    head = model.head
    return head.project(features) if isinstance(head, ProjectionHead) else features


def contrastive_loss(z: torch.Tensor, z_glob: torch.Tensor, z_prev: torch.Tensor, tau: float) -> torch.Tensor:
    """MOON Eq. 2, averaged over the batch (the positive pair is ``(z, z_glob)``)."""
    sims = torch.stack([F.cosine_similarity(z, z_glob, dim=-1), F.cosine_similarity(z, z_prev, dim=-1)], -1) / tau
    return F.cross_entropy(sims, torch.zeros(len(z), dtype=torch.long, device=z.device))


def reference_representation(model: nn.Module, params: State, buffers: State, x: torch.Tensor) -> torch.Tensor:
    """``z`` of ``model`` carrying ``params`` and copies of ``buffers``, in eval mode (every
    module's train/eval flag restored afterwards)."""
    state = {f"model.{k}": v for k, v in params.items()}
    state.update({f"model.{k}": b.clone() for k, b in buffers.items()})
    flags = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        return functional_call(_Representation(model), state, (x,))
    finally:
        for m, flag in flags:
            m.training = flag


@ALGORITHMS.register("moon")
class Moon(Algorithm):
    config_class = MoonConfig
    stacked_unsupported = "MOON runs the received and the previous model on every batch (model_loss)"

    def __init__(self, cfg: MoonConfig) -> None:
        super().__init__(cfg)
        if not cfg.mu >= 0:
            raise ConfigError(f"algo.mu={cfg.mu} is invalid: the contrastive weight μ is >= 0")
        if not cfg.tau > 0:
            raise ConfigError(f"algo.tau={cfg.tau} is invalid: the temperature τ is > 0")
        if cfg.projection_dim < 1:
            raise ConfigError(f"algo.projection_dim={cfg.projection_dim} is invalid: at least 1")

    def prepare_model(self, model: nn.Module) -> nn.Module:
        """The model with ``ProjectionHead`` in place of its linear ``head``."""
        head = getattr(model, "head", None)
        if not isinstance(head, nn.Linear) or not hasattr(model, "forward_features"):
            raise ConfigError(f"algo=moon needs a model with forward_features and a linear head; "
                              f"{type(model).__name__} has none")
        if self.cfg.projection_head:
            model.head = ProjectionHead(head.in_features, self.cfg.projection_dim, head.out_features).to(
                head.weight.device, head.weight.dtype)
        return model

    def start(self, params: State, client_state: dict[str, Any]) -> LocalTree:
        """The base local tree; after the client's first round also the received weights
        (``global``) and its previous model (``previous``)."""
        local = super().start(params, client_state)
        if "previous" in client_state:
            local["global"] = {k: p.clone() for k, p in params.items()}
            local["previous"] = client_state["previous"]
        return local

    def model_loss(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, local: LocalTree) -> torch.Tensor:
        """Eq. 3: cross-entropy plus ``μ`` times the model-contrastive loss; the cross-entropy alone
        without a previous model (the client's first round). The received buffers are copied at the
        round's first call, before its forward in train mode updates the running statistics."""
        if "previous" not in local:
            return self.loss(model(x), y)
        received = local.setdefault("buffers", {k: b.detach().clone() for k, b in model.named_buffers()})
        h = model.forward_features(x)
        loss = self.loss(model.head(h), y)
        z = representation(model, h)
        with torch.no_grad():
            z_glob, z_prev = (reference_representation(model, local[name], received, x) for name in ("global", "previous"))
        return loss + self.cfg.mu * contrastive_loss(z, z_glob, z_prev, self.cfg.tau)

    def finish(self, params: State, local: LocalTree) -> tuple[State, dict[str, State], dict[str, Any]]:
        upload, extras, state = super().finish(params, local)
        return upload, extras, {**state, "previous": {k: p.clone() for k, p in params.items()}}
