"""Which users train adversarially (FedRBN §5.1 and its code's ``noise_ratio``/``n_noise_domain``).

Domains are taken in ``domain_order`` (default: the dataset's; the code rotates it with
``--domain_order`` for Fig. 3a); in each of the first ``at_domains`` of them, the first
``int(at_fraction × users in the domain)`` users, in client order, are AT users. Without domains
every user belongs to one domain. FedRBN's settings: "All" = ``at_fraction: 1``; Digits "20 %" =
``at_fraction: 0.2, at_domains: 3`` (2 + 2 + 2 of 50 users); "MNIST" = ``at_domains: 1``.
"""
from __future__ import annotations

from typing import Optional, Sequence

from fedbn_bench.core.roles import ADVERSARIAL, STANDARD
from fedbn_bench.errors import ConfigError


def assign_roles(client_domains: Sequence[Optional[int]], domain_names: Sequence[str], at_fraction: float,
                 at_domains: Optional[int] = None, domain_order: Optional[Sequence[str]] = None) -> list[str]:
    """Each client's role (``core.roles``) given its domain index (``None``: no domains)."""
    if not 0 <= at_fraction <= 1:
        raise ConfigError(f"adversarial.at_fraction={at_fraction} is invalid: a share of users in [0, 1]")
    names = list(domain_names) if domain_names else []
    order = list(domain_order) if domain_order else names
    unknown = [d for d in order if d not in names]
    if unknown or len(set(order)) != len(order):
        raise ConfigError(f"adversarial.domain_order={list(order)} is invalid: distinct names from the dataset's "
                          f"domains ({', '.join(names) or 'none: the data has no domains'})")
    count = (len(order) or 1) if at_domains is None else at_domains
    if not 0 <= count <= max(len(order), 1):
        raise ConfigError(f"adversarial.at_domains={at_domains} is invalid: between 0 and the number of "
                          f"domains ({max(len(order), 1)})")
    chosen = {names.index(d) for d in order[:count]} if order else ({None} if count else set())
    groups: dict[Optional[int], list[int]] = {}
    for client, domain in enumerate(client_domains):
        groups.setdefault(domain if order else None, []).append(client)
    roles = [STANDARD] * len(client_domains)
    for domain, clients in groups.items():
        if domain in chosen:
            for client in clients[: int(at_fraction * len(clients) + 1e-9)]:
                roles[client] = ADVERSARIAL
    return roles
