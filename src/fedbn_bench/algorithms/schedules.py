"""Learning-rate schedules indexed by round (for DSGD one round is one step).

- ``constant``.
- ``piecewise``: constant pieces by round, FBN App. C Table 2 (0.1, 0.05, 0.033 switching at
  rounds 1000 and 2000 of 3000): ``milestones`` are round indices, ``rates`` the learning rates,
  one more value than milestones.
- ``multistep``: multiply by ``factor`` (0.1) at each fraction of the rounds in ``milestones``
  (FixBN App. B: 50% and 75%).
- ``exponential``: ``lr * decay**round`` (HBN §4.1, decay 0.998 per round).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEDULES = ("constant", "piecewise", "multistep", "exponential")


@dataclass
class ScheduleConfig:
    """Learning-rate schedule over rounds (see ``algorithms/schedules.py``)."""

    name: str = "constant"
    milestones: list[float] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    factor: float = 0.1
    decay: float = 0.998


def validate_schedule(cfg: Any, key: str) -> None:
    """Raise ``ValueError`` naming ``key`` when the schedule config is inconsistent."""
    if cfg.name not in SCHEDULES:
        raise ValueError(f"{key}.name='{cfg.name}' is unknown; allowed: {', '.join(SCHEDULES)}")
    if cfg.name == "piecewise" and len(cfg.rates) != len(cfg.milestones) + 1:
        raise ValueError(f"{key}: piecewise needs len(rates) == len(milestones) + 1")
    if cfg.name == "multistep" and any(not 0 < m < 1 for m in cfg.milestones):
        raise ValueError(f"{key}.milestones must be fractions of the rounds in (0, 1)")
    if cfg.name == "multistep" and not 0 < cfg.factor:
        raise ValueError(f"{key}.factor={cfg.factor} is invalid: the multistep factor is > 0 (e.g. 0.1)")
    if cfg.name == "exponential" and not 0 < cfg.decay:
        raise ValueError(f"{key}.decay={cfg.decay} is invalid: the exponential decay per round is > 0 (e.g. 0.998)")
    if cfg.name == "piecewise" and any(not r > 0 for r in cfg.rates):
        raise ValueError(f"{key}.rates={list(cfg.rates)} are invalid: every learning rate is > 0")


def learning_rate(base_lr: float, cfg: Any, round_idx: int, total_rounds: int) -> float:
    """The learning rate of round ``round_idx`` (0-based) out of ``total_rounds``."""
    if cfg.name == "constant":
        return base_lr
    if cfg.name == "piecewise":
        passed = sum(round_idx >= m for m in cfg.milestones)
        return float(cfg.rates[passed])
    if cfg.name == "multistep":
        passed = sum(round_idx >= int(m * total_rounds) for m in cfg.milestones)
        return base_lr * cfg.factor**passed
    return base_lr * cfg.decay**round_idx
