"""The evaluator: runs the run's metric list (``metrics/``) on the current state of the store,
with the norm's statistics branch for testing selected (FedRBN: BN_a or BN_c). With
``adversarial.robust_test=best_val`` its evaluations leave the test splits unattacked; the run
loop tests the best validation round's state once at the end (``robust_test``)."""
from __future__ import annotations

from typing import Sequence

import torch

from fedbn_bench.core.updates import State
from fedbn_bench.engine.clients import ClientStore
from fedbn_bench.engine.federation import Federation
from fedbn_bench.engine.sampling import evaluated_clients
from fedbn_bench.errors import ConfigError
from fedbn_bench.metrics.base import EvalContext, Metric


class Evaluator:
    def __init__(self, fed: Federation, store: ClientStore, metrics: Sequence[Metric], batch_size: int = 128,
                 seed: int = 0, train_batch_size: int | None = None, clients: int | None = None,
                 batched: bool = False, client_test: Sequence[torch.Tensor | None] | None = None) -> None:
        """``batch_size``: the evaluation's; ``train_batch_size``: a client's in training (for
        metrics that mimic it, ``EvalContext.train_batch_size``); ``clients``: how many clients an
        evaluation tests (``None``: all); ``batched``: their models evaluated together;
        ``client_test``: each client's test split (default: its record's)."""
        self.fed, self.store, self.metrics = fed, store, list(metrics)
        self.batch_size, self.train_batch_size, self.seed = batch_size, train_batch_size, seed
        self.clients, self.batched = clients, batched
        self.follows_partition = client_test is not None
        self.client_test = list(client_test) if client_test is not None else [r.test_indices for r in store.records]
        self.client_rows: dict[str, dict[int, float]] = {}
        """The per-client values of the last evaluation, by metric (``EvalContext.client_values``)."""
        adversarial = fed.adversarial
        self.test_branch = adversarial.test_branch if adversarial is not None else "clean"
        self.robust_attacks = adversarial.evaluation_attacks(fed.data.num_classes, seed) if adversarial else {}
        self.defers_robust_test = bool(self.robust_attacks) and adversarial.cfg.robust_test == "best_val"
        """Whether evaluations skip the test splits' attacks (tested once, at the best validation round)."""
        if self.defers_robust_test and not all(r.val_indices is not None for r in store.records):
            raise ConfigError("adversarial.robust_test=best_val tests the best validation round, but the run has no "
                              "validation split: set val_fraction > 0 (FedRBN: 0.5) or adversarial.robust_test=every")

    def context(self, global_state: State | None = None, robust_test: bool = True, round_number: int = 0) -> EvalContext:
        fed, store = self.fed, self.store
        state = store.global_state if global_state is None else global_state
        keys = store.local_keys
        return EvalContext(
            model=fed.model,
            test_x=fed.data.test.x,
            test_y=fed.data.test.y,
            load_global=lambda: fed.model.load_state_dict(state),
            load_client=lambda c: store.load_client(fed.model, c),
            client_test=self.client_test,
            domain_test=fed.domain_test,
            batch_size=self.batch_size,
            train_x=fed.data.train.x,
            train_y=fed.data.train.y,
            client_val=[r.val_indices for r in store.records],
            client_domain=[None if r.domain is None else fed.data.domain_names[r.domain] for r in store.records],
            robust_attacks=self.robust_attacks,
            client_role=[r.role for r in store.records],
            client_train=[r.indices for r in store.records],
            train_batch_size=self.train_batch_size,
            seed=self.seed,
            robust_test=robust_test,
            clients=evaluated_clients(len(store), self.clients, self.seed, round_number),
            batched=self.batched,
            shared=store.global_state,
            client_own=lambda c: with_global(store.client_local[c], store.global_state, keys),
        )

    def describe(self) -> str:
        """Which evaluation the run uses, for its summary (``evaluation``)."""
        if not any(m.tests_clients for m in self.metrics):
            return "global model"
        tested = ("every client" if self.clients is None or self.clients >= len(self.store)
                  else f"{self.clients} of {len(self.store)} clients drawn per evaluation")
        given = [t is not None for t in self.client_test]
        split = ("its split of the test set following its training partition" if self.follows_partition
                 else "its test split" if all(given) else "the whole test set" if not any(given)
                 else "its test split, or the whole test set")
        return f"client models: {tested}, each on {split}{', batched' if self.batched else ''}"

    def evaluate(self, global_state: State | None = None, robust_test: bool | None = None,
                 round_number: int = 0) -> dict[str, float]:
        """Every metric's columns after ``round_number`` rounds (which clients a sampled evaluation
        tests); ``global_state`` replaces the store's global state for this evaluation only (e.g.
        HBN's statistics re-estimated for testing, HBN §4.1); ``robust_test``: whether the test
        splits are attacked (default: unless ``defers_robust_test``). The per-client values go to
        ``client_rows``."""
        robust_test = not self.defers_robust_test if robust_test is None else robust_test
        ctx, row = self.context(global_state, robust_test, round_number), {}
        with self.fed.norm.branch(self.fed.model, self.test_branch):
            for metric in self.metrics:
                row.update(metric(ctx))
        self.client_rows = ctx.client_values
        return row


def with_global(own: State, global_state: State, keys: list[str]) -> State:
    """A client's values of ``keys``, the global value for each it does not hold yet."""
    return {k: own.get(k, global_state[k]) for k in keys}
