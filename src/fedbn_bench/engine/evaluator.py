"""The evaluator: runs the run's metric list (``metrics/``) on the current state of the store,
with the norm's statistics branch for testing selected (FedRBN: BN_a or BN_c). With
``adversarial.robust_test=best_val`` its evaluations leave the test splits unattacked; the run
loop tests the best validation round's state once at the end (``robust_test``)."""
from __future__ import annotations

from typing import Sequence

from fedbn_bench.core.updates import State
from fedbn_bench.engine.clients import ClientStore
from fedbn_bench.engine.federation import Federation
from fedbn_bench.errors import ConfigError
from fedbn_bench.metrics.base import EvalContext, Metric


class Evaluator:
    def __init__(self, fed: Federation, store: ClientStore, metrics: Sequence[Metric], batch_size: int = 128,
                 seed: int = 0, train_batch_size: int | None = None) -> None:
        """``batch_size``: the evaluation's; ``train_batch_size``: a client's in training (for
        metrics that mimic it, ``EvalContext.train_batch_size``)."""
        self.fed, self.store, self.metrics = fed, store, list(metrics)
        self.batch_size, self.train_batch_size, self.seed = batch_size, train_batch_size, seed
        adversarial = fed.adversarial
        self.test_branch = adversarial.test_branch if adversarial is not None else "clean"
        self.robust_attacks = adversarial.evaluation_attacks(fed.data.num_classes, seed) if adversarial else {}
        self.defers_robust_test = bool(self.robust_attacks) and adversarial.cfg.robust_test == "best_val"
        """Whether evaluations skip the test splits' attacks (tested once, at the best validation round)."""
        if self.defers_robust_test and not all(r.val_indices is not None for r in store.records):
            raise ConfigError("adversarial.robust_test=best_val tests the best validation round, but the run has no "
                              "validation split: set val_fraction > 0 (FedRBN: 0.5) or adversarial.robust_test=every")

    def context(self, global_state: State | None = None, robust_test: bool = True) -> EvalContext:
        fed, store = self.fed, self.store
        state = store.global_state if global_state is None else global_state
        return EvalContext(
            model=fed.model,
            test_x=fed.data.test.x,
            test_y=fed.data.test.y,
            load_global=lambda: fed.model.load_state_dict(state),
            load_client=lambda c: store.load_client(fed.model, c),
            client_test=[r.test_indices for r in store.records],
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
        )

    def evaluate(self, global_state: State | None = None, robust_test: bool | None = None) -> dict[str, float]:
        """Every metric's columns; ``global_state`` replaces the store's global state for this
        evaluation only (e.g. HBN's statistics re-estimated for testing, HBN §4.1); ``robust_test``:
        whether the test splits are attacked (default: unless ``defers_robust_test``)."""
        robust_test = not self.defers_robust_test if robust_test is None else robust_test
        ctx, row = self.context(global_state, robust_test), {}
        with self.fed.norm.branch(self.fed.model, self.test_branch):
            for metric in self.metrics:
                row.update(metric(ctx))
        return row
