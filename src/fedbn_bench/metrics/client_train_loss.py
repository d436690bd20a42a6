"""Each client's model after aggregation, in eval mode, on that client's own training data (FedBN Fig. 3:
the authors' ``fed_digits.py`` logs as "Train Loss" the loss of the model each client holds after the
server's aggregation, evaluated on its training set: the averaged model for FedAvg, where the averaged
BN statistics act, the averaged weights with the client's own BN for FedBN; ``../shared/repro``, FedBN
Fig. 3). Un-augmented, validation samples held out (``EvalContext.client_train``).

Columns: ``client_train_loss_<i>`` and ``client_train_acc_<i>`` per client, and ``client_train_loss`` /
``client_train_acc``, their unweighted mean over clients (FedBN's Digits clients hold equal shares).
``train_loss``, in contrast, is the clients' mean training-mode loss over the round's local steps.
"""
from __future__ import annotations

from fedbn_bench.metrics.base import METRICS, EvalContext, Metric, accuracy_and_loss
from fedbn_bench.metrics.global_train_loss import indexed_outcomes


@METRICS.register("client_train_loss")
class ClientTrainLoss(Metric):
    def __call__(self, ctx: EvalContext) -> dict[str, float]:
        row: dict[str, float] = {}
        for client, idx in enumerate(ctx.client_train):
            ctx.load_client(client)
            acc, loss = accuracy_and_loss(*indexed_outcomes(ctx.model, ctx.train_x, ctx.train_y,
                                                            idx.to(ctx.train_y.device), ctx.batch_size))
            row[f"client_train_loss_{client}"], row[f"client_train_acc_{client}"] = loss, acc
        clients = len(ctx.client_train)
        row["client_train_loss"] = sum(row[f"client_train_loss_{c}"] for c in range(clients)) / clients
        row["client_train_acc"] = sum(row[f"client_train_acc_{c}"] for c in range(clients)) / clients
        return row
