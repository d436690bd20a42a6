"""The evaluator: runs the run's metric list (``metrics/``) on the current state of the store."""
from __future__ import annotations

from typing import Sequence

from fedbn_bench.engine.clients import ClientStore
from fedbn_bench.engine.federation import Federation
from fedbn_bench.metrics.base import EvalContext, Metric


class Evaluator:
    def __init__(self, fed: Federation, store: ClientStore, metrics: Sequence[Metric], batch_size: int = 1024) -> None:
        self.fed, self.store, self.metrics = fed, store, list(metrics)
        self.batch_size = batch_size

    def context(self) -> EvalContext:
        fed, store = self.fed, self.store
        return EvalContext(
            model=fed.model,
            test_x=fed.data.test.x,
            test_y=fed.data.test.y,
            load_global=lambda: fed.model.load_state_dict(store.global_state),
            load_client=lambda c: store.load_client(fed.model, c),
            client_test=[r.test_indices for r in store.records],
            domain_test=fed.domain_test,
            batch_size=self.batch_size,
        )

    def evaluate(self) -> dict[str, float]:
        ctx, row = self.context(), {}
        for metric in self.metrics:
            row.update(metric(ctx))
        return row
