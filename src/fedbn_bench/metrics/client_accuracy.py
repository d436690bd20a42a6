"""Each client's own model on its own test split (the whole test set when it has none), for
methods that keep state on the clients (FedBN §5 and Fig. 5 / Table 1: each client's accuracy
on its domain's test set, and their average; local training).

Columns: ``client_acc_<i>`` per client; ``acc_<domain>`` (the mean over the domain's clients)
per domain when the clients have domains; ``test_acc``/``test_loss``, the unweighted mean over
domains (FedBN's "average") or, without domains, over clients; ``client_acc_mean`` and
``client_acc_min`` over clients. With a validation split (``val_fraction``), ``val_acc`` and
``val_loss``: each client's own model on its own validation data, averaged the same way.
"""
from __future__ import annotations

from fedbn_bench.metrics.base import METRICS, EvalContext, Metric, mean_over_domains


@METRICS.register("client_accuracy")
class ClientAccuracy(Metric):
    def __call__(self, ctx: EvalContext) -> dict[str, float]:
        test, val = [], []
        for client in range(len(ctx.client_test)):
            test.append(ctx.client_evaluation(client, "test"))
            if ctx.has_validation:
                val.append(ctx.client_evaluation(client, "val"))
        accs = [acc for acc, _ in test]
        test_acc, per_domain = mean_over_domains(accs, ctx.client_domain)
        row = {"test_acc": test_acc, "test_loss": mean_over_domains([loss for _, loss in test], ctx.client_domain)[0],
               "client_acc_mean": sum(accs) / len(accs), "client_acc_min": min(accs),
               **{f"client_acc_{client}": acc for client, acc in enumerate(accs)},
               **{f"acc_{domain}": acc for domain, acc in per_domain.items()}}
        if val:
            row["val_acc"] = mean_over_domains([acc for acc, _ in val], ctx.client_domain)[0]
            row["val_loss"] = mean_over_domains([loss for _, loss in val], ctx.client_domain)[0]
        return row
