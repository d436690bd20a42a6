"""What a client sends to the server after local training: one typed ``ClientUpdate``.

The design (docs/ARCHITECTURE.md, "One round"): a backend returns one ``ClientUpdate`` per client
and mutates nothing else; update transforms (Byzantine attacks, later DP or compression) may
replace updates; the aggregator combines them for the algorithm (weights, extras) and the norm
(statistics). Every tensor a client uploads is in here: there is no side channel.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

State = dict[str, torch.Tensor]
"""Tensors keyed by state-dict name (weights, buffers, optimizer buffers)."""


@dataclass
class LayerStatistics:
    """The statistics one normalization layer of one client uploads (the schema an attack or a
    robust rule may rely on): per-channel ``mean`` and ``var`` (a variance: non-negative), the
    number of values per channel they summarize (``count``, a float64 scalar), and any further
    tensors the method needs, declared in ``meta`` (e.g. FBN's between-client factor)."""

    mean: torch.Tensor
    var: torch.Tensor
    count: torch.Tensor
    meta: State = field(default_factory=dict)


Statistics = dict[str, LayerStatistics]
"""A client's statistics: normalization-layer name (a module path; ``<path>:<branch>`` for a further
set of statistics of the same layer, e.g. dual BN's adversarial branch) -> its ``LayerStatistics``."""


@dataclass
class ClientUpdate:
    """One client's upload of one round.

    ``weights`` is what the algorithm uploads for the learnable weights (FedAvg: the new weights;
    DSGD: the gradient message; keys kept local by the norm are never in it); ``statistics`` the
    norm's upload; ``extras`` the algorithm's other uploads, namespaced (``extras["momentum"]``
    is a state of momentum buffers); ``num_samples`` the client's data size; ``loss`` its mean
    training loss of the round.
    """

    client: int
    weights: State
    statistics: Statistics
    extras: dict[str, State]
    num_samples: int
    loss: torch.Tensor

    def with_weights(self, weights: State) -> "ClientUpdate":
        """A copy with other ``weights`` (what an update transform returns)."""
        return replace(self, weights=weights)

    def with_statistics(self, statistics: Statistics) -> "ClientUpdate":
        """A copy with other ``statistics``."""
        return replace(self, statistics=statistics)
