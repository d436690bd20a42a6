"""One round of the pipeline (docs/ARCHITECTURE.md, "One round"):

sample clients (seed, round) -> ``algo.broadcast`` (what each client starts from) -> local
training on a backend (one ``ClientUpdate`` per client, nothing else mutated) -> the chain of
update transforms -> ``algo.server_update`` (weights, through the aggregator) and the norm's
``aggregate_statistics`` (statistics, through the same aggregator) -> the store keeps the
clients' own state.
"""
from __future__ import annotations

from typing import Sequence

import torch

from fedbn_bench.algorithms.schedules import learning_rate
from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.transforms import RoundInfo, UpdateTransform
from fedbn_bench.core.updates import ClientUpdate
from fedbn_bench.engine.backends.base import Backend, ClientJob
from fedbn_bench.engine.clients import ClientStore
from fedbn_bench.engine.federation import Federation
from fedbn_bench.engine.sampling import generator, sample_clients
from fedbn_bench.engine.settings import RunSettings


class RoundRunner:
    """Runs rounds: the pipeline above, for one federation on one backend."""

    def __init__(self, fed: Federation, store: ClientStore, backend: Backend, settings: RunSettings,
                 aggregator: Aggregator, transforms: Sequence[UpdateTransform] = ()) -> None:
        self.fed, self.store, self.backend, self.s = fed, store, backend, settings
        self.aggregator, self.transforms = aggregator, list(transforms)
        self.batch_size = fed.algo.batch_size(settings.batch_size, settings.clients_per_round)
        self.samples_seen = 0

    def sample(self, round_idx: int) -> list[int]:
        return sample_clients(len(self.store), self.s.clients_per_round, generator(self.s.seed, round_idx))

    def jobs(self, clients: list[int]) -> list[ClientJob]:
        algo, store = self.fed.algo, self.store
        return [ClientJob(client=c, start=algo.broadcast(store.global_state, c), local=store.client_local[c],
                          algo_state=store.client_algo_state[c], indices=store.records[c].indices,
                          steps=algo.num_steps(store.records[c].size, self.batch_size))
                for c in clients]

    def run_round(self, round_idx: int) -> torch.Tensor:
        """One training round; returns the mean training loss of its clients."""
        fed, s, store = self.fed, self.s, self.store
        lr = learning_rate(s.lr, s.schedule, round_idx, s.rounds)
        fed.norm.on_round_start(round_idx, s.rounds, fed.model)
        clients = self.sample(round_idx)
        jobs = self.jobs(clients)
        results = self.backend.train(jobs, round_idx, lr)
        for job, result in zip(jobs, results):
            store.keep(job.client, result.local, result.algo_state)
            self.samples_seen += job.steps * self.batch_size
        updates: list[ClientUpdate] = [r.update for r in results]
        info = RoundInfo(round_idx, s.seed, clients)
        for transform in self.transforms:
            updates = transform(updates, info)
        weights = fed.algo.client_weights(store.sizes[clients])
        new_weights = fed.algo.server_update(store.global_state, updates, weights, self.aggregator, lr)
        new_statistics = fed.norm.aggregate_statistics([u.statistics for u in updates], weights, self.aggregator,
                                                       store.global_state)
        store.global_state.update(new_weights)
        store.global_state.update(new_statistics)
        return torch.stack([u.loss for u in updates]).mean()

    def statistics_round(self, round_idx: int) -> None:
        """A statistics-only round (no training): HBN Alg. 1 at t = T + 1."""
        fed, store = self.fed, self.store
        fed.norm.on_round_start(round_idx, self.s.rounds, fed.model)
        clients = self.sample(round_idx)
        stats = []
        for job in self.jobs(clients):
            self.backend.load(job)
            stats.append(self.backend.pre_statistics(job))
        weights = fed.algo.client_weights(store.sizes[clients])
        store.global_state.update(fed.norm.aggregate_statistics(stats, weights, self.aggregator, store.global_state))
