"""The ``byzantine`` config group: which clients are Byzantine, their attack, and the server's
defense (FBN §5: n = 10 clients, f = 3 Byzantine sending the opposite of the honest mean of their
BN statistics; coordinate-wise median after NNM as the defense).

``build_byzantine`` validates the group before any training and returns the attack transform
(``None`` without an attack) and the aggregators for the weights and for the statistics. The
Byzantine clients are a fixed set of ``f`` client ids drawn from the run's seed; with partial
participation a round holds those of them that were sampled. ``defense`` names an aggregation rule
(``mean`` or a robust rule of ``robust/aggregators.py``, given this ``f`` and ``nnm``) applied to
the statistics, and also to the weights with ``defense_target: both`` (FBN Table 2's
"Robust-DSGD"). With ``f = 0``, no attack and ``defense: mean`` nothing changes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from fedbn_bench.core.aggregation import AGGREGATORS, Aggregator
from fedbn_bench.errors import ConfigError
from fedbn_bench.robust.aggregators import RobustAggregator, RobustConfig
from fedbn_bench.robust.attacks import ATTACKS, TARGETS, VARIANCES, ByzantineAttack

DEFENSE_TARGETS = ("statistics", "weights", "both")


@dataclass
class ByzantineConfig:
    f: int = 0
    attack: str = "none"
    target: str = "statistics"
    variance: str = "honest"
    foe_eps: float = 0.1
    alie_z: Optional[float] = None
    gaussian_mu: float = 0.0
    gaussian_sigma: float = 1.0
    defense: str = "mean"
    nnm: bool = False
    defense_target: str = "statistics"


def byzantine_clients(num_clients: int, f: int, seed: int) -> frozenset[int]:
    """``f`` client ids drawn from ``seed`` (the same for every round of the run)."""
    order = torch.randperm(num_clients, generator=torch.Generator(device="cpu").manual_seed(seed + 7919), device="cpu")
    return frozenset(int(c) for c in order[:f])


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"byzantine.{key}='{value}' is unknown; allowed: {', '.join(allowed)}")


def validate_byzantine(cfg: Any, clients_per_round: int, aggregator_name: str) -> None:
    """One clear error per bad key, before training."""
    defenses = ("mean", *sorted(n for n in AGGREGATORS.names() if issubclass(AGGREGATORS.get(n), RobustAggregator)))
    _choice("attack", cfg.attack, ATTACKS)
    _choice("target", cfg.target, TARGETS)
    _choice("variance", cfg.variance, VARIANCES)
    _choice("defense", cfg.defense, defenses)
    _choice("defense_target", cfg.defense_target, DEFENSE_TARGETS)
    if cfg.f < 0:
        raise ConfigError(f"byzantine.f={cfg.f} is invalid: the number of Byzantine clients is >= 0")
    if cfg.f and 2 * cfg.f >= clients_per_round:
        raise ConfigError(f"byzantine.f={cfg.f} needs f < n/2 with n = clients_per_round = {clients_per_round}")
    if cfg.attack != "none" and not cfg.f:
        raise ConfigError(f"byzantine.attack={cfg.attack} needs byzantine.f > 0 Byzantine clients")
    if cfg.defense != "mean" and aggregator_name != "mean":
        raise ConfigError(f"byzantine.defense={cfg.defense} and aggregator={aggregator_name} both choose the "
                          "server's rule: set one of them")
    if not cfg.foe_eps > 0:
        raise ConfigError(f"byzantine.foe_eps={cfg.foe_eps} is invalid: FOE's ε is > 0")
    if not cfg.gaussian_sigma >= 0:
        raise ConfigError(f"byzantine.gaussian_sigma={cfg.gaussian_sigma} is invalid: a standard deviation is >= 0")


def byzantine_labels(cfg: Any) -> dict[str, Any]:
    """What ``metrics.csv``, ``summary.json`` and W&B record about the group: nothing when it is
    idle (no Byzantine client, mean), else ``byzantine_f``, ``attack`` and ``defense``."""
    if not cfg.f and cfg.defense == "mean":
        return {}
    defense = cfg.defense + ("+nnm" if cfg.nnm and cfg.defense != "mean" else "")
    return {"byzantine_f": cfg.f, "attack": cfg.attack, "defense": defense}


def build_byzantine(cfg: Any, num_clients: int, clients_per_round: int, seed: int,
                    aggregator: Aggregator) -> tuple[Optional[ByzantineAttack], Aggregator, Aggregator]:
    """``(attack transform or None, weights aggregator, statistics aggregator)``."""
    validate_byzantine(cfg, clients_per_round, aggregator.cfg.name if aggregator.cfg else "mean")
    attack = None
    if cfg.attack != "none":
        attack = ByzantineAttack(cfg, byzantine_clients(num_clients, cfg.f, seed), clients_per_round)
    if cfg.defense == "mean":
        return attack, aggregator, aggregator
    defense = AGGREGATORS.get(cfg.defense)(RobustConfig(name=cfg.defense, f=cfg.f, nnm=cfg.nnm))
    weights = defense if cfg.defense_target in ("weights", "both") else aggregator
    statistics = defense if cfg.defense_target in ("statistics", "both") else aggregator
    return attack, weights, statistics
