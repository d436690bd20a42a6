"""The 2-D Gaussian normalization study of FBN §3 (Fig. 1) and §4 (Fig. 2).

Ten classes ``i = 1..10`` with ``x ~ N(μᵢ, s² I₂)``, ``μᵢ = 10 (cos 2π(i-1)/10, sin 2π(i-1)/10)``,
``s² = 1``; every round draws ``m = 30`` fresh points per class. The points are dealt to the ten
clients with the project's gamma-similarity partition (FBN §4 "Modeling heterogeneity"): ``γ = 0``
gives client ``i`` exactly class ``i`` (the paper's setting of Fig. 1b and 2a/b), ``γ = 1`` an iid
split. The union of the clients' batches is the same for every ``γ``.

A model is one normalization layer (``N = 1``, §3) built by the project's norm methods, run the way
the engine runs a round: load the global state, forward the client's batch in training mode,
upload ``client_statistics``, ``aggregate_statistics`` on the server. The reference is centralized
BatchNorm (torch, training mode) on the union batch. The normalization error of a round is the
mean Euclidean distance between a method's normalized points and the centralized ones (§4,
Fig. 2c).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from omegaconf import OmegaConf
from torch import nn

from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.data.toy_gaussian import class_means
from fedbn_bench.engine.sampling import derive_seed, generator
from fedbn_bench.norms import NORMS, NormMethod, build_norm
from fedbn_bench.partition import make_partition

METHODS = {"naive": "bn", "fixbn": "fixbn", "fbn": "fbn"}
"""Toy method name -> registered norm method."""


def draw_points(
    seed: int, round_idx: int, m: int = 30, num_classes: int = 10, s2: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``m`` fresh points per class for one round: (x of shape (m·n, 2), labels)."""
    means = class_means(num_classes)
    labels = torch.arange(num_classes).repeat_interleave(m)
    noise = torch.randn(len(labels), 2, generator=generator(seed, round_idx))
    return means[labels] + math.sqrt(s2) * noise, labels


def build_toy_norm(method: str, beta: float, num_clients: int) -> NormMethod:
    """The project's norm method behind a toy method name, with momentum ``beta`` and no affine."""
    name = METHODS[method]
    cfg = OmegaConf.structured(NORMS.get(name).config_class(momentum=beta, affine=False))
    if name == "fbn":
        cfg.num_clients = num_clients
    return build_norm(cfg)


@dataclass
class ToyRun:
    """Per-round errors and the last round's points (raw, federated, centralized, labels)."""

    errors: torch.Tensor
    raw: torch.Tensor
    federated: torch.Tensor
    centralized: torch.Tensor
    labels: torch.Tensor


@torch.no_grad()
def run_toy(method: str, gamma: float, rounds: int = 100, beta: float = 0.1, m: int = 30,
            num_clients: int = 10, seed: int = 0) -> ToyRun:
    """``rounds`` rounds of federated normalization with ``method`` against centralized BN."""
    norm = build_toy_norm(method, beta, num_clients)
    model = nn.Sequential(norm.norm_layer(2, 1))
    central = nn.BatchNorm1d(2, momentum=beta, affine=False)
    global_state = {k: v.clone() for k, v in model.state_dict().items()}
    weights = torch.full((num_clients,), 1.0 / num_clients)
    errors = []
    for t in range(rounds):
        x, labels = draw_points(seed, t, m, num_clients)
        parts = make_partition("gamma", labels, num_clients, derive_seed(seed, t), gamma=gamma)
        norm.on_round_start(t, rounds, model)
        outputs, stats = [], []
        for p in parts:
            model.load_state_dict(global_state)
            model.train()
            outputs.append(model(x[p]))
            stats.append(norm.client_statistics(model, len(p)))
        global_state.update(norm.aggregate_statistics(stats, weights, Aggregator(), global_state))
        order = torch.cat(parts)
        federated = torch.empty_like(x)
        federated[order] = torch.cat(outputs)
        centralized = central.train()(x)
        errors.append((federated - centralized).norm(dim=1).mean())
    return ToyRun(torch.stack(errors), x, federated, centralized, labels)
