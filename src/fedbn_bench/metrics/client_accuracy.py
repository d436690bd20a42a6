"""Each client's own model on its own test split (the whole test set when it has none), for
methods that keep state on the clients (FedBN §5, local training): ``test_acc``/``test_loss`` are
the means over clients, with ``client_acc_mean`` and ``client_acc_min``."""
from __future__ import annotations

from fedbn_bench.metrics.base import METRICS, EvalContext, Metric, evaluate


@METRICS.register("client_accuracy")
class ClientAccuracy(Metric):
    def __call__(self, ctx: EvalContext) -> dict[str, float]:
        accs, losses = [], []
        for client, idx in enumerate(ctx.client_test):
            ctx.load_client(client)
            x, y = (ctx.test_x, ctx.test_y) if idx is None else (ctx.test_x[idx], ctx.test_y[idx])
            acc, loss = evaluate(ctx.model, x, y, ctx.batch_size)
            accs.append(acc)
            losses.append(loss)
        mean_acc = sum(accs) / len(accs)
        return {"test_acc": mean_acc, "test_loss": sum(losses) / len(losses), "client_acc_mean": mean_acc,
                "client_acc_min": min(accs)}
