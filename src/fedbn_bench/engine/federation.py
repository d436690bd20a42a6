"""What is simulated: data on the device, the clients' records, the model and the strategies."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import torch
from torch import nn

from fedbn_bench.adversarial.training import AdversarialTraining
from fedbn_bench.algorithms.base import Algorithm
from fedbn_bench.data import DatasetBundle
from fedbn_bench.data.registry import make_generator
from fedbn_bench.norms.base import NormMethod

VALIDATION_STREAM = 61
"""Stream tag of the validation split's generators, ``(seed, VALIDATION_STREAM, client)`` (the
dataset loaders use tags 11-51)."""


@dataclass
class ClientRecord:
    """One client: its training indices, its own test (and validation) indices when the
    partition gives it some, its domain id, and its role (e.g. FedRBN's adversarial-training
    users; ``standard`` by default). A pooled client (``Algorithm.pools_clients``) drawing the
    union of one batch per original client has ``strata``: the sizes of the consecutive blocks
    of ``indices`` that are those clients' data."""

    indices: torch.Tensor
    test_indices: Optional[torch.Tensor] = None
    val_indices: Optional[torch.Tensor] = None
    domain: Optional[int] = None
    role: str = "standard"
    strata: Optional[list[int]] = None

    @property
    def size(self) -> int:
        return len(self.indices)


@dataclass
class Federation:
    """The data, the clients, the model and the strategies of one simulation (the adversarial
    training objective: ``adversarial/training.py``, clean training by default)."""

    data: DatasetBundle
    clients: list[ClientRecord]
    model: nn.Module
    norm: NormMethod
    algo: Algorithm
    domain_test: dict[str, torch.Tensor] = field(default_factory=dict)
    adversarial: Optional[AdversarialTraining] = None
    client_test_split: Optional[list[torch.Tensor]] = None
    """Each client's split of the test set that follows its training partition
    (``partition.follow_partition``), tested by a personalized evaluation where the partition
    gives the clients no test split (``evaluation.client_test=partition``); ``None``: none."""

    @property
    def num_clients(self) -> int:
        return len(self.clients)


def hold_out_validation(indices: torch.Tensor, fraction: float, seed: int,
                        client: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(train, validation)``: ``max(1, floor(fraction·n))`` of a client's ``n`` training
    ``indices``, drawn uniformly at random (not stratified: FedBN's code holds out a tail of each
    site's shuffled training list) with a generator of ``(seed, client)`` only, become its
    validation indices; the rest stay for training. Both keep the order of ``indices``."""
    n = len(indices)
    held_out = max(1, math.floor(fraction * n + 1e-9))  # the epsilon keeps e.g. 0.3 * 10 at 3
    mask = torch.zeros(n, dtype=torch.bool, device="cpu")
    mask[torch.randperm(n, generator=make_generator(seed, VALIDATION_STREAM, client), device="cpu")[:held_out]] = True
    mask = mask.to(indices.device)
    return indices[~mask], indices[mask]
