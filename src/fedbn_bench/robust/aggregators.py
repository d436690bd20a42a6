"""Robust aggregation rules (FBN §5: coordinate-wise median [Yin et al. 2018] and trimmed mean,
each after nearest-neighbour mixing, NNM [Allouah et al. 2023]; Krum [Blanchard et al. 2017] and
the geometric median [Pillutla et al. 2022] as further defenses), as ``Aggregator``s.

Each rule is written here on the clients' values flattened to ``(n, d)``, in their own dtype
(``byzfl`` computes in float32; ``tests/test_byzantine.py`` checks every rule against byzfl's
``Median``, ``TrMean``, ``Krum``, ``GeometricMedian`` and ``NNM`` on random inputs, to float32
precision). ``f`` is the number of Byzantine clients a rule tolerates (trimmed mean drops ``f``
values per side and coordinate). Robust rules weigh every client alike: the aggregation weights
(data sizes) are what a Byzantine client could lie about. The distance-based rules (NNM, Krum,
geometric median) measure distances over what one call receives: a whole model's weights when
the algorithm aggregates a state (``aggregate_many`` stacks all keys), one moment of one layer for
statistics (each norm aggregates its statistics layer by layer).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch

from fedbn_bench.core.aggregation import AGGREGATORS, Aggregator, AggregatorConfig
from fedbn_bench.errors import ConfigError


@dataclass
class RobustConfig(AggregatorConfig):
    name: str = "median"
    f: int = 0
    nnm: bool = False


class RobustAggregator(Aggregator):
    """A rule on the flattened values, optionally after NNM."""

    config_class = RobustConfig
    coordinate_wise: bool = False
    """Whether the rule treats each coordinate apart (then, without NNM, a state is aggregated key
    by key: the same result without concatenating the whole state)."""

    def __init__(self, cfg: Any = None) -> None:
        super().__init__(cfg or self.config_class())
        if self.cfg.f < 0:
            raise ConfigError(f"aggregator.f={self.cfg.f} is invalid: the number of Byzantine clients is >= 0")

    def rule(self, flat: torch.Tensor) -> torch.Tensor:
        """The aggregate ``(d,)`` of ``flat`` ``(n, d)``."""
        raise NotImplementedError

    def needs_more_than(self, f: int) -> tuple[int, str]:
        """The rule's precondition on the number ``n`` of clients it aggregates: ``n`` must exceed
        the returned bound, given with its formula (default: a majority of honest clients,
        ``n > 2f``, the breakdown point of the median, trimmed mean and geometric median; it also
        covers NNM's ``n > f``, mixing each client with its ``n − f`` nearest)."""
        return 2 * f, "2f"

    def check(self, n: int) -> None:
        """Refuse ``n`` values the rule cannot aggregate with its ``f`` (before training, with
        ``n = clients_per_round``; again in each round, with the clients that trained)."""
        f = self.cfg.f
        bound, formula = self.needs_more_than(f)
        if n <= bound:
            raise ConfigError(f"{self.cfg.name} with f={f} needs more than {formula} = {bound} clients per round, "
                              f"got {n}: lower `f` or raise `clients_per_round`")

    def __call__(self, values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        n = values.shape[0]
        self.check(n)
        flat = values.reshape(n, -1).to(torch.promote_types(values.dtype, torch.float32))
        if self.cfg.nnm:
            flat = nearest_neighbour_mixing(flat, self.cfg.f)
        return self.rule(flat).reshape(values.shape[1:]).to(values.dtype)

    def aggregate_many(self, stacks: dict[str, torch.Tensor], weights: torch.Tensor) -> dict[str, torch.Tensor]:
        """All keys as one vector per client (distances over the whole state), in the widest of
        their dtypes; key by key for a coordinate-wise rule without NNM."""
        if self.coordinate_wise and not self.cfg.nnm:
            return super().aggregate_many(stacks, weights)
        n = next(iter(stacks.values())).shape[0]
        dtype = functools.reduce(torch.promote_types, (v.dtype for v in stacks.values()))
        out = self(torch.cat([v.reshape(n, -1).to(dtype) for v in stacks.values()], dim=1), weights)
        parts = out.split([v[0].numel() for v in stacks.values()])
        return {k: part.reshape(v.shape[1:]).to(v.dtype) for (k, v), part in zip(stacks.items(), parts)}


def nearest_neighbour_mixing(flat: torch.Tensor, f: int) -> torch.Tensor:
    """NNM: each row replaced by the mean of its ``n − f`` nearest rows (itself included)."""
    k = flat.shape[0] - f
    nearest = torch.cdist(flat, flat).topk(k, dim=1, largest=False).indices
    return flat[nearest].mean(1)


@AGGREGATORS.register("median")
class Median(RobustAggregator):
    """Coordinate-wise median (the mean of the two middle values for an even count, as byzfl)."""

    coordinate_wise = True

    def rule(self, flat: torch.Tensor) -> torch.Tensor:
        return flat.quantile(0.5, dim=0) if flat.shape[1] else flat.sum(0)


@AGGREGATORS.register("trimmed_mean")
class TrimmedMean(RobustAggregator):
    """Coordinate-wise mean of the values left after dropping the ``f`` largest and ``f`` smallest."""

    coordinate_wise = True

    def rule(self, flat: torch.Tensor) -> torch.Tensor:
        f = self.cfg.f
        return flat.sort(dim=0).values[f:flat.shape[0] - f].mean(0)


@AGGREGATORS.register("krum")
class Krum(RobustAggregator):
    """The row with the smallest mean squared distance to its ``n − f − 1`` nearest other rows."""

    def needs_more_than(self, f: int) -> tuple[int, str]:
        """Krum's guarantee needs ``n > 2f + 2`` (Blanchard et al. 2017)."""
        return 2 * f + 2, "2f + 2"

    def rule(self, flat: torch.Tensor) -> torch.Tensor:
        n = flat.shape[0]
        squared = torch.cdist(flat, flat).square().sort(dim=1).values[:, 1:n - self.cfg.f]
        return flat[squared.mean(1).argmin()]


@AGGREGATORS.register("geometric_median")
class GeometricMedian(RobustAggregator):
    """The geometric median by ``iterations`` smoothed Weiszfeld steps from 0, distances floored at
    ``nu`` (byzfl's defaults ν = 0.1, T = 3; Pillutla et al. 2022)."""

    iterations, nu = 3, 0.1

    def rule(self, flat: torch.Tensor) -> torch.Tensor:
        z = torch.zeros_like(flat[0])
        for _ in range(self.iterations):
            betas = (1 / len(flat)) / (flat - z).norm(dim=1).clamp(min=self.nu)
            z = (flat * betas[:, None]).sum(0) / betas.sum()
        return z
