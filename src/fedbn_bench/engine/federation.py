"""What is simulated: data on the device, the clients' records, the model and the strategies."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch
from torch import nn

from fedbn_bench.algorithms.base import Algorithm
from fedbn_bench.data import DatasetBundle
from fedbn_bench.norms.base import NormMethod


@dataclass
class ClientRecord:
    """One client: its training indices, its own test (and validation) indices when the
    partition gives it some, its domain id, and its role (e.g. FedRBN's adversarial-training
    users; ``standard`` by default)."""

    indices: torch.Tensor
    test_indices: Optional[torch.Tensor] = None
    val_indices: Optional[torch.Tensor] = None
    domain: Optional[int] = None
    role: str = "standard"

    @property
    def size(self) -> int:
        return len(self.indices)


@dataclass
class Federation:
    """The data, the clients, the model and the two strategies of one simulation."""

    data: DatasetBundle
    clients: list[ClientRecord]
    model: nn.Module
    norm: NormMethod
    algo: Algorithm
    domain_test: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def num_clients(self) -> int:
        return len(self.clients)
