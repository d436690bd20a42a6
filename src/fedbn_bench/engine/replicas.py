"""Several seeds of one config in one pass (``replicas=k``): k simulations trained in lockstep.

Each replica is a whole simulation of its own: its seed, hence its data draws, partition, model
initialization and client sampling; its server state; its records, in its own run directory. Only
local training is shared: every round, the jobs of all replicas go to *one* backend call, so a
stacked backend (``vmap``, ``packed``) trains the k replicas' clients as one stack, k times the
clients of a round (the packed network's client axis extended by replicas). A ``ClientJob``
names its run's data split and seed, so each client draws the batches of its own run, and the
results equal those of k separate runs on the same backend (``tests/test_replicas.py``, float64).

The shared backend is the first replica's. That is sound when the algorithm's local steps read
nothing of the server's state except through the jobs (``Algorithm.local_steps_read_server_state``:
SCAFFOLD's control variate ``c`` is read on the algorithm object), when the model has no dropout (one
stacked round makes one dropout draw for the whole stack, seeded by its first job's run, so a replica
would draw other masks than its separate run) and, under adversarial training,
when the replicas attack in the same pixel space (a dataset normalized with statistics of its own
draw gives each seed its own); otherwise, and on ``engine=loop``
(where a stack buys nothing), each replica trains on its own backend, still in lockstep.

Time: each replica's ``train_seconds`` (hence ``samples_per_s``) and ``wall_time_s`` are those of
the whole group, the time its records took to produce.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
from torch import nn

from fedbn_bench.engine.backends.base import Backend, ClientResult
from fedbn_bench.engine.round import RoundPlan
from fedbn_bench.engine.run_loop import drive
from fedbn_bench.engine.simulation import Simulation

STACKED_ENGINES = ("vmap", "packed")
DROPOUT = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)


def unshared_reason(sims: Sequence[Simulation]) -> Optional[str]:
    """Why the replicas cannot share the first one's backend, or ``None`` when they can."""
    engines = {sim.engine for sim in sims}
    if len(engines) > 1:
        return f"the replicas run on different engines ({', '.join(sorted(engines))})"
    engine = sims[0].engine
    if engine not in STACKED_ENGINES:
        return f"engine={engine} trains one client at a time"
    rates = sorted({m.p for m in sims[0].fed.model.modules() if isinstance(m, DROPOUT) and m.p > 0})
    if rates:
        return (f"the model has dropout (rate {', '.join(map(str, rates))}): one stack draws one dropout mask for "
                "every replica's clients, a separate run one for its own")
    algo = sims[0].fed.algo
    if algo.local_steps_read_server_state:
        return f"algo={algo.cfg.name}: its local steps read the server's state on the algorithm object"
    spaces = [sim.fed.adversarial.space for sim in sims if sim.fed.adversarial is not None and sim.fed.adversarial.active]
    if any(not space.same_as(spaces[0]) for space in spaces):
        return "adversarial training's pixel space (the dataset's normalization, drawn with each seed) differs"
    return None


class ReplicaGroup:
    """Runs ``sims`` (one config, different seeds) round by round, training them together."""

    def __init__(self, sims: Sequence[Simulation], progress: bool = True) -> None:
        if len({sim.s.rounds for sim in sims}) != 1:
            raise ValueError("replicas must run the same number of rounds")
        self.sims, self.progress = list(sims), progress
        self.unshared = unshared_reason(self.sims)
        """Why each replica trains on its own backend (``None``: one shared backend)."""
        self.backend: Optional[Backend] = None if self.unshared else self.sims[0].backend
        if self.backend is not None:  # one stack: every replica's local steps ran as the shared backend records
            for sim in self.sims[1:]:
                sim.graph_record = sim.loop.graphs = self.sims[0].graph_record

    def run(self) -> list[dict[str, Any]]:
        """Run every replica to its end; their summaries, in the order of ``sims``."""
        return drive([sim.loop for sim in self.sims],
                     lambda active, round_idx: self.train_round([self.sims[i] for i in active], round_idx),
                     self.progress, desc=f"rounds ({len(self.sims)} replicas)")

    def train_round(self, sims: list[Simulation], round_idx: int) -> list[Optional[torch.Tensor]]:
        """Round ``round_idx`` of ``sims``: planned by each, trained together, completed by each."""
        plans = [sim.rounds.plan(round_idx) for sim in sims]
        if self.backend is None:
            results = [sim.backend.train(plan.jobs, round_idx, plan.lr) if plan else None
                       for sim, plan in zip(sims, plans)]
        else:
            results = self.train_together(plans, round_idx)
        return [sim.rounds.complete(plan, result) if plan else None
                for sim, plan, result in zip(sims, plans, results)]

    def train_together(self, plans: list[Optional[RoundPlan]], round_idx: int) -> list[Optional[list[ClientResult]]]:
        """The jobs of every plan in one call of the shared backend, split back by plan."""
        present = [plan for plan in plans if plan is not None]
        if not present:
            return [None] * len(plans)
        if len({plan.lr for plan in present}) != 1:
            raise ValueError("replicas must share the learning rate of a round")
        jobs = [job for plan in present for job in plan.jobs]
        flat = iter(self.backend.train(jobs, round_idx, present[0].lr))
        return [None if plan is None else [next(flat) for _ in plan.jobs] for plan in plans]
