"""``iid``: a uniformly random split into near-equal parts."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._registry import near_equal_sizes, parts_from_owner, register_partition


@dataclass
class IidConfig:
    """Schema of ``partition=iid`` (no parameters)."""

    name: str = "iid"


@register_partition("iid", IidConfig)
def iid(labels: torch.Tensor, num_clients: int, generator: torch.Generator, *, domains=None) -> list[torch.Tensor]:
    """Shuffle all samples and cut them into ``num_clients`` parts whose sizes differ by at most one."""
    n = labels.numel()
    perm = torch.randperm(n, generator=generator)
    owner = torch.empty(n, dtype=torch.int64)
    owner[perm] = torch.repeat_interleave(torch.arange(num_clients), near_equal_sizes(n, num_clients))
    return parts_from_owner(owner, num_clients)
