"""The active clients of one stacked step, seen by an adversarial-training objective as one model.

An objective (``adversarial/training.py``: PGD-AT, Free-AT, the PNC loss of FedRBN §4) is
written against a model of samples: it switches statistics branches (``NormMethod.branch``),
puts the model in eval mode for the attack, restores buffers (``no_statistics_update``), takes
input gradients and clips a term's parameter gradient. ``StackedModel`` offers exactly that over
the stack of a vectorized backend (``vmap`` or ``packed``): the inputs of the ``n`` active
clients are their ``B`` samples each, client-major, ``(n * B, ...)``; the logits come back in the
same order. Client ``i``'s samples meet only client ``i``'s parameters and statistics, so an
input gradient of the summed loss is each client's own, and the objective's per-client terms
(shape ``(n,)``, from ``logits``) combine as under ``engine=loop``.

The branch switches act on the run's model (``TrainingContext.model``), which the packed layers
and ``functional_call`` read at call time; train/eval mode on ``runner``, the module whose forward
computes the logits (the packed copy, or the run's model under ``vmap``); the buffers are the
stack's active rows.
"""
from __future__ import annotations

from typing import Callable, Iterator

import torch
from torch import nn

from fedbn_bench.core.updates import State

StackedLogits = Callable[[State, torch.Tensor], torch.Tensor]
"""``(parameters and buffers of the n active clients, inputs (n, B, ...)) -> logits (n, B, K)``;
running statistics are updated in place in the buffers given."""


class StackedModel:
    """A model-like view of ``n`` stacked clients: ``model(x)`` with ``x`` of shape ``(n * B, ...)``."""

    def __init__(self, source: nn.Module, runner: nn.Module, logits_fn: StackedLogits, params: State,
                 buffers: State, n: int) -> None:
        self.source, self.runner, self.logits_fn = source, runner, logits_fn
        self.params, self.buffers, self.clients = params, buffers, n

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Each client's logits ``(n, B, K)`` of its samples ``x`` ``(n * B, ...)``."""
        return self.logits_fn({**self.params, **self.buffers}, x.view(self.clients, -1, *x.shape[1:]))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits(x).flatten(0, 1)

    @property
    def training(self) -> bool:
        return self.runner.training

    def train(self, mode: bool = True) -> "StackedModel":
        self.runner.train(mode)
        return self

    def eval(self) -> "StackedModel":
        return self.train(False)

    def named_modules(self) -> Iterator[tuple[str, nn.Module]]:
        """The run model's modules (where a norm method's branch switches live)."""
        return self.source.named_modules()

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The active clients' stacked buffers (rows of the backend's stack)."""
        return iter(self.buffers.items())

    def parameters(self) -> Iterator[torch.Tensor]:
        """The active clients' stacked parameters (leading client axis)."""
        return iter(self.params.values())
