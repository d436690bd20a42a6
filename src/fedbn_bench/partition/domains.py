"""``domains``: feature shift (FedBN).  Every client holds samples of a single domain.

Requires per-sample domain ids ``0 .. D-1`` (all present).  Client ``c``
belongs to domain ``c // clients_per_domain``; ``clients_per_domain``
defaults to ``num_clients // D`` and ``num_clients`` must equal
``clients_per_domain * D`` so that no domain is left out.

Inside a domain the samples are split at random and stratified by label: the
domain's samples are ordered by label (random order inside a class) and dealt
round-robin to the domain's clients.  Client sizes within a domain therefore
differ by at most one and so does every per-class count, i.e. all clients of a
domain share the domain's label distribution.  Domains may differ in size.

``num_domains`` is not used by the split: it is the number of synthetic
feature-shift domains the runner asks of a dataset that has no domains of its
own (``dataset.num_domains=0``); it is validated here with the other keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from ._registry import PartitionError, check_int, grouped_order, parts_from_owner, register_partition

NO_DOMAINS_MSG = (
    "partition 'domains' needs per-sample domain ids but the dataset has no domains; "
    "use a feature-shift dataset (dataset.num_domains > 1) or another partition"
)


@dataclass
class DomainsConfig:
    """Schema of ``partition=domains``: synthetic domain count and clients per domain (None: even)."""

    name: str = "domains"
    num_domains: int = 5
    clients_per_domain: Optional[int] = None
    samples_per_client: Optional[int] = None
    """Keep at most this many samples per client (a label-stratified subset, the first ones the
    round-robin deal gives it); None keeps all. FedRBN uses 30 % of Digits (§5): this shrinks
    a large dataset such as MNIST to that scale."""


def client_domains(num_clients: int, num_domains: int) -> torch.Tensor:
    """Domain id of each client (``c // (num_clients // num_domains)``), int64 of length ``num_clients``."""
    num_domains = check_int("num_domains", num_domains, minimum=1)
    num_clients = check_int("num_clients", num_clients, minimum=1)
    if num_clients % num_domains:
        raise PartitionError(
            f"num_clients must be a multiple of the number of domains ({num_domains}) (got {num_clients})"
        )
    return torch.arange(num_clients) // (num_clients // num_domains)


@register_partition("domains", DomainsConfig)
def domains_partition(
    labels: torch.Tensor,
    num_clients: int,
    generator: torch.Generator,
    *,
    domains: torch.Tensor | None = None,
    num_domains: int = 5,
    clients_per_domain: int | None = None,
    samples_per_client: int | None = None,
) -> list[torch.Tensor]:
    check_int("num_domains", num_domains, minimum=1, partition="domains")
    if domains is None:
        raise PartitionError(NO_DOMAINS_MSG)
    present = torch.bincount(domains)
    n_domains = present.numel()
    missing = torch.nonzero(present == 0).flatten()
    if missing.numel():
        raise PartitionError(
            f"domains must use every id 0..{n_domains - 1}; no sample has domain {int(missing[0])}"
        )
    if clients_per_domain is None:
        if num_clients % n_domains:
            raise PartitionError(
                f"num_clients must be a multiple of the number of domains ({n_domains}) "
                f"for partition 'domains' (got {num_clients})"
            )
        cpd = num_clients // n_domains
    else:
        cpd = check_int("clients_per_domain", clients_per_domain, minimum=1, partition="domains")
        if cpd * n_domains != num_clients:
            raise PartitionError(
                f"clients_per_domain * number of domains ({n_domains}) must equal num_clients "
                f"(got clients_per_domain={cpd}, num_clients={num_clients})"
            )
    if int(present.min()) < cpd:
        d = int(torch.argmin(present))
        raise PartitionError(
            f"clients_per_domain={cpd} exceeds the {int(present[d])} samples of domain {d}"
        )

    n = labels.numel()
    num_labels = int(labels.max()) + 1
    order = grouped_order(domains * num_labels + labels, generator)
    dom = domains[order]
    domain_start = torch.cumsum(present, 0) - present
    pos = torch.arange(n) - domain_start[dom]
    owner = torch.empty(n, dtype=torch.int64)
    owner[order] = dom * cpd + pos % cpd
    if samples_per_client is not None:
        cap = check_int("samples_per_client", samples_per_client, minimum=1, partition="domains")
        owner[~stratified_subset(owner, labels, num_labels, cap, generator)] = -1
    return parts_from_owner(owner, num_clients)


def stratified_subset(owner: torch.Tensor, labels: torch.Tensor, num_labels: int, cap: int,
                      generator: torch.Generator) -> torch.Tensor:
    """A mask keeping ``cap`` samples of each client (all of a smaller one), labels taken in
    turn: the random first of each of its labels, then the second of each, and so on."""
    group = owner * num_labels + labels
    order = grouped_order(group, generator)
    counts = torch.bincount(group, minlength=int(group.max()) + 1)
    rank = torch.empty_like(group)
    rank[order] = torch.arange(group.numel()) - (torch.cumsum(counts, 0) - counts)[group[order]]
    priority = torch.argsort(owner * group.numel() * num_labels + rank * num_labels + labels, stable=True)
    sizes = torch.bincount(owner)
    position = torch.empty_like(group)
    position[priority] = torch.arange(group.numel()) - (torch.cumsum(sizes, 0) - sizes)[owner[priority]]
    return position < cap
