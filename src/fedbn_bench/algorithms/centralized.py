"""Centralized training on the pooled data: the reference every FL method is compared against.

With ``union_batch`` (default) the per-round batch has ``batch_size × clients_per_round`` samples,
what DSGD sees per step (FBN Remark 4.1). ``union_draw`` says how it is drawn:

* ``per_client`` (default): the union of one batch of ``batch_size`` per client, each drawn from
  the client's own data exactly as that client draws it under DSGD (same generator), as in
  Remark 4.1 (under γ = 0 every batch holds ``batch_size`` samples of each client's classes);
  it needs every client in the union (``clients_per_round = num_clients``) and no
  ``val_fraction``;
* ``uniform``: ``batch_size × clients_per_round`` samples drawn uniformly from the pooled data.

Without ``union_batch`` the batch is ``batch_size`` samples drawn uniformly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from fedbn_bench.algorithms.base import ALGORITHMS, AlgoConfig, Algorithm
from fedbn_bench.errors import ConfigError

UNION_DRAWS = ("per_client", "uniform")


@dataclass
class CentralizedConfig(AlgoConfig):
    name: str = "centralized"
    local_steps: Optional[int] = 1
    union_batch: bool = True
    union_draw: str = "per_client"


@ALGORITHMS.register("centralized")
class Centralized(Algorithm):
    config_class = CentralizedConfig
    pools_clients = True

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        if cfg.union_draw not in UNION_DRAWS:
            raise ConfigError(f"algo.union_draw='{cfg.union_draw}' is unknown; allowed: {', '.join(UNION_DRAWS)}")
        self.pools_by_client = cfg.union_batch and cfg.union_draw == "per_client"

    def batch_size(self, batch_size: int, clients_per_round: int) -> int:
        return batch_size * clients_per_round if self.cfg.union_batch else batch_size
