"""Aggregation rules: how the server combines one tensor uploaded by every sampled client.

An ``Aggregator`` maps a stack ``(n, ...)`` of the clients' values and their weights ``(n,)``
(summing to one) to one value. The same aggregator is handed to the algorithm (weights, extras)
and to the norm (statistics), so a robust rule (median, trimmed mean, ...) applies to both
without touching either. Rules are small pure functions in the spirit of Flower's
``strategy/aggregate.py``; a new rule is one module registering a subclass in ``AGGREGATORS``
plus one YAML in ``conf/aggregator``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from fedbn_bench.core.updates import State
from fedbn_bench.registry import Registry


@dataclass
class AggregatorConfig:
    name: str = "mean"


class Aggregator:
    """Base class; the default rule is the weighted mean (FedAvg, McMahan et al. 2017)."""

    config_class: type = AggregatorConfig

    def __init__(self, cfg: Any = None) -> None:
        self.cfg = cfg

    def __call__(self, values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """One value from the clients' ``values`` ``(n, ...)`` with ``weights`` ``(n,)``."""
        return weighted_mean(values, weights)

    def check(self, n: int) -> None:
        """Refuse to aggregate ``n`` clients when the rule cannot (raises ``ConfigError``; the
        weighted mean takes any number)."""

    def aggregate_many(self, stacks: dict[str, torch.Tensor], weights: torch.Tensor) -> dict[str, torch.Tensor]:
        """Several keys of one state at once (default: key by key; a rule that measures distances
        between clients overrides it to see the whole state)."""
        return {key: self(values, weights) for key, values in stacks.items()}


def weighted_mean(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``sum_i w_i x_i`` over the leading axis, in float32 at least (the dtype of ``values``
    is kept in the result); one contraction, without an ``(n, ...)`` product in memory."""
    dtype = torch.promote_types(values.dtype, torch.float32)
    return torch.tensordot(weights.to(values.device, dtype), values.to(dtype), dims=1).to(values.dtype)


def aggregate_states(aggregator: Aggregator, states: Sequence[State], weights: torch.Tensor) -> State:
    """Key-wise aggregation of the clients' states (all with the same keys)."""
    if not states:
        return {}
    return aggregator.aggregate_many({key: torch.stack([s[key] for s in states]) for key in states[0]}, weights)


AGGREGATORS: Registry[type[Aggregator]] = Registry("aggregator")
AGGREGATORS.register("mean")(Aggregator)
