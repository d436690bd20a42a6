"""One round of the pipeline (docs/ARCHITECTURE.md, "One round"):

sample clients (seed, round) -> ``algo.broadcast`` (what each client starts from) -> [the
pre-training statistics pass, ``statistics_pass.py``, for norms that compute statistics before
training] -> local training on a backend (one ``ClientUpdate`` per client, nothing else mutated)
-> the chain of update transforms -> ``algo.server_update`` (weights, through the aggregator) and
the norm's ``aggregate_statistics`` (statistics, through the same aggregator) -> the store keeps
the clients' own state -> the norm's ``propagate`` on the clients' own state (FedRBN Eq. 3-4).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import torch

from fedbn_bench.algorithms.schedules import learning_rate
from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.transforms import RoundInfo, UpdateTransform
from fedbn_bench.core.updates import ClientUpdate, State
from fedbn_bench.engine.backends.base import Backend, ClientJob, ClientResult
from fedbn_bench.engine.clients import ClientStore
from fedbn_bench.engine.federation import Federation
from fedbn_bench.engine.sampling import generator, participating, sample_clients
from fedbn_bench.engine.settings import RunSettings
from fedbn_bench.engine.statistics_pass import statistics_pass


@dataclass
class RoundPlan:
    """A round planned up to local training (``RoundRunner.plan``)."""

    round_idx: int
    lr: float
    clients: list[int]
    jobs: list[ClientJob]
    pass_statistics: State


class RoundRunner:
    """Runs rounds: the pipeline above, for one federation on one backend."""

    def __init__(self, fed: Federation, store: ClientStore, backend: Backend, settings: RunSettings,
                 aggregator: Aggregator, transforms: Sequence[UpdateTransform] = (),
                 statistics_aggregator: Optional[Aggregator] = None) -> None:
        self.fed, self.store, self.backend, self.s = fed, store, backend, settings
        self.aggregator, self.transforms = aggregator, list(transforms)
        self.statistics_aggregator = statistics_aggregator or aggregator
        """The rule for statistics (a Byzantine defense may apply to them only, FBN §5)."""
        self.batch_size = fed.algo.batch_size(settings.batch_size, settings.clients_per_round)
        self.samples_seen = 0
        self.cycles = settings.small_clients == "cycle"

    def sample(self, round_idx: int) -> list[int]:
        """The round's participants: the sampled clients holding a full batch (all of them unless
        ``small_clients=skip``)."""
        sampled = sample_clients(len(self.store), self.s.clients_per_round, generator(self.s.seed, round_idx))
        return participating(sampled, self.store.sizes, 1 if self.cycles else self.batch_size)

    def jobs(self, clients: list[int], broadcast: bool = True) -> list[ClientJob]:
        """The clients' jobs, starting from the algorithm's broadcast (``broadcast=False``: from
        the global state itself, the model that is evaluated)."""
        algo, store = self.fed.algo, self.store
        return [ClientJob(client=c, start=algo.broadcast(store.global_state, c) if broadcast else store.global_state,
                          local=store.client_local[c],
                          algo_state=store.client_algo_state[c], data=self.fed.data.train,
                          indices=store.records[c].indices, seed=self.s.seed,
                          steps=algo.num_steps(self.train_size(c), self.batch_size),
                          strata=store.records[c].strata, role=store.records[c].role)
                for c in clients]

    def train_size(self, client: int) -> int:
        """The size ``client``'s local epochs count (one batch at least under ``small_clients=cycle``)."""
        size = self.store.records[client].size
        return max(size, self.batch_size) if self.cycles else size

    def weights(self, clients: list[int]) -> torch.Tensor:
        """Aggregation weights of ``clients``: the algorithm's, as the norm method adjusts them."""
        sizes = self.store.sizes[clients]
        return self.fed.norm.client_weights(self.fed.algo.client_weights(sizes), sizes)

    def run_round(self, round_idx: int) -> Optional[torch.Tensor]:
        """One training round; returns the mean training loss of its clients, or ``None`` when no
        sampled client holds a full batch (nothing trained, nothing changes, no loss to record)."""
        plan = self.plan(round_idx)
        if plan is None:
            return None
        return self.complete(plan, self.backend.train(plan.jobs, round_idx, plan.lr))

    def plan(self, round_idx: int) -> Optional[RoundPlan]:
        """The round up to local training: its learning rate, participants, their jobs and the
        statistics of the pre-training pass; ``None`` when no sampled client holds a full batch."""
        fed, s = self.fed, self.s
        lr = learning_rate(s.lr, s.schedule, round_idx, s.rounds)
        fed.norm.on_round_start(round_idx, s.rounds, fed.model)
        clients = self.sample(round_idx)
        if not clients:
            return None
        jobs = self.jobs(clients)
        pass_statistics = self.statistics_pass(round_idx, jobs) if fed.norm.statistics_before_training else {}
        return RoundPlan(round_idx, lr, clients, jobs, pass_statistics)

    def complete(self, plan: RoundPlan, results: list[ClientResult]) -> torch.Tensor:
        """The round after local training (``results``: one per job of ``plan``): transforms,
        aggregation, the clients' own state, propagation; returns the clients' mean loss."""
        fed, s, store, lr = self.fed, self.s, self.store, plan.lr
        for job, result in zip(plan.jobs, results):
            store.keep(job.client, result.local, result.algo_state)
            self.samples_seen += job.steps * self.batch_size
        updates: list[ClientUpdate] = [r.update for r in results]
        info = RoundInfo(plan.round_idx, s.seed, plan.clients, store.global_state if fed.algo.uploads_weights else None)
        for transform in self.transforms:
            updates = transform(updates, info)
        weights = self.weights(plan.clients)
        new_weights = fed.algo.server_update(store.global_state, updates, weights, self.aggregator, lr)
        new_statistics = fed.norm.aggregate_statistics([u.statistics for u in updates], weights,
                                                       self.statistics_aggregator, store.global_state)
        store.global_state.update(new_weights)
        store.global_state.update(new_statistics)
        store.global_state.update(plan.pass_statistics)
        fed.norm.propagate(store.client_local, [r.role for r in store.records])
        return torch.stack([u.loss for u in updates]).mean()

    def statistics_pass(self, round_idx: int, jobs: list[ClientJob]) -> State:
        """The statistics of ``jobs``' clients from the norm's pre-training pass, aggregated (not
        yet stored): under the weights they received, the same for all, before training (HBN
        Eq. 7, Alg. 1)."""
        fed, store = self.fed, self.store
        if not one_start(jobs):
            raise ValueError(f"algo={fed.algo.cfg.name} broadcasts different weights to the clients of a round; "
                             f"norm={fed.norm.cfg.name}'s statistics pass needs the same weights for all (HBN Eq. 7)")
        clients = [job.client for job in jobs]
        return statistics_pass(fed.norm, fed.model, lambda i: self.backend.load(jobs[i]),
                               [fed.data.train.x[job.indices] for job in jobs],
                               RoundInfo(round_idx, self.s.seed, clients), self.weights(clients),
                               self.statistics_aggregator, store.global_state, self.transforms)

    def fresh_statistics(self, round_idx: int) -> State:
        """The statistics re-estimated (λ = 1) under the current global weights (not a look-ahead
        broadcast such as FedACG's) on round ``round_idx``'s sampled clients (HBN §4.1: before
        each test, and Alg. 1's round T + 1)."""
        with self.fed.norm.fresh_statistics():
            return self.statistics_pass(round_idx, self.jobs(self.sample(round_idx), broadcast=False))

    def statistics_round(self, round_idx: int) -> None:
        """A statistics-only round (no training): HBN Alg. 1 at t = T + 1, on freshly sampled clients."""
        self.fed.norm.on_round_start(round_idx, self.s.rounds, self.fed.model)
        self.store.global_state.update(self.fresh_statistics(round_idx))


def one_start(jobs: list[ClientJob]) -> bool:
    """Whether every job starts from the same state (the same tensors or equal ones)."""
    first = jobs[0].start if jobs else {}
    return all(job.start is first or (job.start.keys() == first.keys() and all(
        v is first[k] or torch.equal(v, first[k]) for k, v in job.start.items())) for job in jobs)
