"""Accuracy and loss of the global model on the whole test set (``test_acc``, ``test_loss``)."""
from __future__ import annotations

from fedbn_bench.metrics.base import METRICS, EvalContext, Metric, evaluate


@METRICS.register("global_accuracy")
class GlobalAccuracy(Metric):
    def __call__(self, ctx: EvalContext) -> dict[str, float]:
        ctx.load_global()
        acc, loss = evaluate(ctx.model, ctx.test_x, ctx.test_y, ctx.batch_size)
        return {"test_acc": acc, "test_loss": loss}
