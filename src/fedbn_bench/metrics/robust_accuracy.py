"""Robust accuracy (FedRBN §5, "RA"): accuracy under the run's evaluation attacks, per user.

Each user is tested with its own model (global weights plus its own local keys) on its own test
split (the whole test set without one), under the statistics branch the evaluator selected
(FedRBN Table 1: BN_a, propagated for ST users). Columns, for the first attack: ``robust_acc``
(the unweighted mean over domains of the per-domain means, FedRBN's "averaged over users" with
equally many users per domain), ``robust_acc_<domain>``, and per user ``robust_client_acc`` in long
form (``client_metrics.csv``); for the others ``<label>_acc``. The users tested are
``EvalContext.evaluated_clients`` (all of them, or a sample per evaluation at scale). ``clean_acc`` is the same users' clean accuracy averaged the same way (SA; equal
to ``test_acc`` when the run evaluates per user). With a validation split, FedRBN's
model-selection score ``val_select``: each user's validation RA if it trains adversarially, else
its validation SA, averaged over users (FedRBN App. C.1; the code's ``val_acc`` of AT users uses
the attack), and ``val_robust_acc``, the validation RA of those AT users (the only users whose
score needs it; the other users' validation data is not attacked). Without ``ctx.robust_test``
(``adversarial.robust_test=best_val``) the test splits are not attacked: only ``clean_acc`` and
the validation columns.

Cost: the clean accuracies are the per-client ones (``EvalContext.client_evaluation``, computed
once per evaluation); the attacks run on channels-last batches with channels-last convolution
weights (as the clean evaluation, ``metrics/base.py``), the PGD start drawn in NCHW order so
that the examples are those of the NCHW layout (``adversarial/pgd.py``).
"""
from __future__ import annotations

import torch
from torch import nn

from fedbn_bench.core.roles import ADVERSARIAL
from fedbn_bench.metrics.base import METRICS, EvalContext, Metric, channels_last_weights, mean_over_domains


def robust_accuracy(model: nn.Module, attack, x: torch.Tensor, y: torch.Tensor, batch_size: int) -> float:
    """Accuracy of ``model`` (eval mode) on ``attack``'s adversarial examples of ``(x, y)``."""
    model.eval()
    correct = 0
    with channels_last_weights(model, x) as layout:
        for start in range(0, len(y), batch_size):
            xb, yb = layout(x[start : start + batch_size]), y[start : start + batch_size]
            with torch.enable_grad():
                x_adv = attack(model, xb, yb)
            with torch.no_grad():
                correct += (model(layout(x_adv)).argmax(1) == yb).sum().item()
    return correct / max(len(y), 1)


@METRICS.register("robust_accuracy")
class RobustAccuracy(Metric):
    tests_clients = True

    def __call__(self, ctx: EvalContext) -> dict[str, float]:
        if not ctx.robust_attacks:
            return {}
        columns = list(ctx.robust_attacks)
        robust: dict[str, list[float]] = {column: [] for column in columns}
        clean, select, val_robust = [], [], []
        clients = ctx.evaluated_clients
        domains = ctx.domains_of(clients)
        for client in clients:
            clean.append(ctx.client_evaluation(client, "test")[0])
            ctx.load_client(client)
            if ctx.robust_test:
                x, y = ctx.client_data(client, "test")
                for column, attack in ctx.robust_attacks.items():
                    robust[column].append(robust_accuracy(ctx.model, attack, x, y, ctx.batch_size))
            if ctx.has_validation:
                if bool(ctx.client_role) and ctx.client_role[client] == ADVERSARIAL:
                    val_robust.append(robust_accuracy(ctx.model, ctx.robust_attacks[columns[0]],
                                                      *ctx.client_data(client, "val"), ctx.batch_size))
                    select.append(val_robust[-1])
                else:
                    select.append(ctx.client_evaluation(client, "val")[0])
        row = {"clean_acc": mean_over_domains(clean, domains)[0]}
        if ctx.robust_test:
            main, per_domain = mean_over_domains(robust[columns[0]], domains)
            row.update({"robust_acc": main, **{f"robust_acc_{domain}": acc for domain, acc in per_domain.items()},
                        **{column: mean_over_domains(robust[column], domains)[0] for column in columns[1:]}})
            ctx.per_client("robust_client_acc", dict(zip(clients, robust[columns[0]])))
        if select:
            row["val_select"] = sum(select) / len(select)
        if val_robust:
            row["val_robust_acc"] = sum(val_robust) / len(val_robust)
        return row
