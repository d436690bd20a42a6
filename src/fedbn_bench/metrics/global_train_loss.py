"""Loss and accuracy of the global model on the training data (FixBN Fig. 2c: "loss of global model
on the training data", the curve that places T* after the first LR decay, §4.2): the global weights
and statistics in eval mode on the union of the clients' training samples (``EvalContext.pooled_train``;
validation samples held out), un-augmented. Columns ``global_train_loss`` and ``global_train_acc``
(``train_loss`` is the clients' mean local training loss of the round, written by the run loop).

Option ``max_samples`` (default ``None``: all of them): at most that many samples, evenly spaced
along the clients' concatenated indices (a fixed subset, the same at every evaluation: every
client's share is kept), for cost on large data sets.
"""
from __future__ import annotations

from typing import Optional

import torch

from fedbn_bench.errors import ConfigError
from fedbn_bench.metrics.base import METRICS, EvalContext, Metric, accuracy_and_loss, outcomes

CHUNK = 4096
"""Samples read at a time (a lazy image store reads only what is indexed)."""


def evenly_spaced(n: int, count: Optional[int]) -> torch.Tensor:
    """Positions ``floor(i · n / count)``, ``i < count``, into ``n`` items (all of them when
    ``count`` is ``None`` or at least ``n``)."""
    if count is None or count >= n:
        return torch.arange(n, device="cpu")
    return torch.arange(count, device="cpu") * n // count


def indexed_outcomes(model: torch.nn.Module, x, y: torch.Tensor, idx: torch.Tensor,
                     batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``outcomes`` of ``model`` on the samples ``idx`` of ``(x, y)``, read chunk by chunk."""
    parts = [outcomes(model, x[chunk], y[chunk], batch_size) for chunk in idx.split(CHUNK)]
    return torch.cat([c for c, _ in parts]), torch.cat([loss for _, loss in parts])


@METRICS.register("global_train_loss")
class GlobalTrainLoss(Metric):
    def __init__(self, max_samples: Optional[int] = None) -> None:
        if max_samples is not None and (isinstance(max_samples, bool) or not isinstance(max_samples, int)
                                        or max_samples < 1):
            raise ConfigError(f"metrics: global_train_loss.max_samples={max_samples!r}: a positive integer or null")
        self.max_samples = max_samples

    def __call__(self, ctx: EvalContext) -> dict[str, float]:
        ctx.load_global()
        pooled = ctx.pooled_train()
        idx = pooled[evenly_spaced(len(pooled), self.max_samples).to(pooled.device)]
        acc, loss = accuracy_and_loss(*indexed_outcomes(ctx.model, ctx.train_x, ctx.train_y, idx, ctx.batch_size))
        return {"global_train_loss": loss, "global_train_acc": acc}
