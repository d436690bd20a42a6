"""``gamma``: gamma-similarity, as in the FBN paper (section 4, "Modeling heterogeneity").

The dataset is split in two.  A homogeneous pool of ``round(gamma * N)``
samples is drawn uniformly at random (without replacement) and shared out
evenly, in random order, among the clients.  The remaining samples are sorted
by label (stable: ascending index order inside a class) and cut into
``num_clients`` consecutive chunks; chunk ``i`` goes to client ``i``.

``gamma = 1`` is an iid split; ``gamma = 0`` is the extreme non-iid split in
which each client receives a contiguous range of the label-sorted data.

Rounding: the pool size is ``floor(gamma * N + 0.5)``.  When the pool or the
sorted remainder does not divide evenly, the pool's extra samples go to the
first clients and the chunks' extra samples to the last ones, so client sizes
differ by at most one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ._registry import PartitionError, check_float, near_equal_sizes, parts_from_owner, register_partition


def pool_size(gamma: float, num_samples: int) -> int:
    """Size of the homogeneous pool: ``round(gamma * N)`` with halves rounded up."""
    return min(num_samples, max(0, math.floor(gamma * num_samples + 0.5)))


@dataclass
class GammaConfig:
    """Schema of ``partition=gamma``: the homogeneous fraction ``gamma`` in [0, 1]."""

    name: str = "gamma"
    gamma: float = 0.5


@register_partition("gamma", GammaConfig)
def gamma_similarity(
    labels: torch.Tensor, num_clients: int, generator: torch.Generator, *, domains=None, gamma: float
) -> list[torch.Tensor]:
    gamma = check_float("gamma", gamma, partition="gamma")
    if not 0.0 <= gamma <= 1.0:
        raise PartitionError(f"gamma must be in [0, 1] for partition 'gamma' (got {gamma})")
    n = labels.numel()
    n_pool = pool_size(gamma, n)
    clients = torch.arange(num_clients)
    owner = torch.empty(n, dtype=torch.int64)

    perm = torch.randperm(n, generator=generator)
    pool, rest = perm[:n_pool], perm[n_pool:]
    # homogeneous part: ``pool`` is already in random order; deal it out in near-equal runs
    owner[pool] = torch.repeat_interleave(clients, near_equal_sizes(n_pool, num_clients))
    # heterogeneous part: stable sort by label (ties by sample index), consecutive chunks
    rest = rest.sort().values
    rest = rest[torch.argsort(labels[rest], stable=True)]
    owner[rest] = torch.repeat_interleave(
        clients, near_equal_sizes(rest.numel(), num_clients, extra_first=False)
    )
    return parts_from_owner(owner, num_clients)
