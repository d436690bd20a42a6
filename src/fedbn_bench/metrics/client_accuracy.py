"""Each client's own model on its own test split, for methods that keep state on the clients
(FedBN §5 and Fig. 5 / Table 1: each client's accuracy on its domain's test set, and their
average; local training). The clients tested are ``EvalContext.evaluated_clients`` (all of them,
or a sample per evaluation at scale); without a test split from the partition a client tests on
the whole test set or on its split of it that follows its training partition (``evaluation``).

Columns: ``acc_<domain>`` (the mean over the domain's clients) per domain when the clients have
domains; ``test_acc``/``test_loss``, the unweighted mean over domains (FedBN's "average") or,
without domains, over clients; ``client_acc_mean`` and ``client_acc_min`` over clients. With a
validation split (``val_fraction``), ``val_acc`` and ``val_loss``: each client's own model on its
own validation data, averaged the same way. Per client, in long form (``client_metrics.csv``):
``client_acc`` and ``client_loss``.
"""
from __future__ import annotations

from fedbn_bench.metrics.base import METRICS, EvalContext, Metric, mean_over_domains


@METRICS.register("client_accuracy")
class ClientAccuracy(Metric):
    tests_clients = True

    def __call__(self, ctx: EvalContext) -> dict[str, float]:
        clients = ctx.evaluated_clients
        domains = ctx.domains_of(clients)
        test = ctx.evaluate_clients(clients, "test")
        val = ctx.evaluate_clients(clients, "val") if ctx.has_validation else []
        accs = [acc for acc, _ in test]
        test_acc, per_domain = mean_over_domains(accs, domains)
        row = {"test_acc": test_acc, "test_loss": mean_over_domains([loss for _, loss in test], domains)[0],
               "client_acc_mean": sum(accs) / len(accs), "client_acc_min": min(accs),
               **{f"acc_{domain}": acc for domain, acc in per_domain.items()}}
        ctx.per_client("client_acc", dict(zip(clients, accs)))
        ctx.per_client("client_loss", {c: loss for c, (_, loss) in zip(clients, test)})
        if val:
            row["val_acc"] = mean_over_domains([acc for acc, _ in val], domains)[0]
            row["val_loss"] = mean_over_domains([loss for _, loss in val], domains)[0]
        return row
