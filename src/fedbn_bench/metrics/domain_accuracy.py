"""Accuracy of the global model on each domain's test data (``acc_<domain>``; FedBN §5)."""
from __future__ import annotations

from fedbn_bench.metrics.base import METRICS, EvalContext, Metric, evaluate


@METRICS.register("domain_accuracy")
class DomainAccuracy(Metric):
    def __call__(self, ctx: EvalContext) -> dict[str, float]:
        if not ctx.domain_test:
            return {}
        ctx.load_global()
        return {f"acc_{name}": evaluate(ctx.model, ctx.test_x[idx], ctx.test_y[idx], ctx.batch_size)[0]
                for name, idx in ctx.domain_test.items()}
