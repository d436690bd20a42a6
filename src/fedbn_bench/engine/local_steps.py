"""Local training, written once for every backend (FedJAX style: the algorithm apart from the
backend that computes forward and backward).

A backend supplies ``forward_backward(params, local, x, y, n, update_statistics) -> (grads, losses)``
for its ``n`` active clients (``n=None``: one client, plain tensors) and the batches of each step;
``update_statistics=False`` computes the same gradients but leaves every buffer (running
statistics, counters) as it was. This driver applies the algorithm's hooks (``local_gradients``,
``gradient_hook``, ``step``) to the same per-client trees whether they hold one client or a
stack, and sums each client's loss.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

import torch

from fedbn_bench.algorithms.base import Algorithm, LocalTree
from fedbn_bench.core.trees import prefix
from fedbn_bench.core.updates import State

ForwardBackward = Callable[[State, LocalTree, torch.Tensor, torch.Tensor, Optional[int], bool],
                           tuple[State, torch.Tensor]]
Step = tuple[Optional[int], torch.Tensor, torch.Tensor]
"""``(n, x, y)``: the number of active clients (``None`` for one client) and their batches."""
OneStep = Callable[[Optional[int], torch.Tensor, torch.Tensor], None]
"""``(n, x, y) -> None``: one local step of ``n`` active clients on their batches, in place."""
StepRunner = Callable[[OneStep, Optional[int], torch.Tensor, torch.Tensor], None]
"""``(one_step, n, x, y) -> None``: runs ``one_step(n, x, y)``, or work equal to it."""


def run_local_steps(algo: Algorithm, forward_backward: ForwardBackward, params: State, local: LocalTree,
                    steps: Iterable[Step], lr: float, loss_sum: torch.Tensor,
                    runner: Optional[StepRunner] = None) -> None:
    """Train ``params`` in place; each active client's loss is added to ``loss_sum``. ``runner``
    runs each step (``graphs.GraphedSteps``: replayed from a captured graph); by default eagerly."""

    def one_step(n: Optional[int], x: torch.Tensor, y: torch.Tensor) -> None:
        active, active_local = prefix(params, n), prefix(local, n)

        def compute(at: State, update_statistics: bool = True):
            return forward_backward(at, active_local, x, y, n, update_statistics)

        grads, losses = algo.local_gradients(compute, active, active_local)
        with torch.no_grad():
            grads = algo.gradient_hook(grads, active, active_local)
            algo.step(active, grads, active_local, lr)
            prefix(loss_sum, n).add_(losses)

    for n, x, y in steps:
        if runner is None:
            one_step(n, x, y)
        else:
            runner(one_step, n, x, y)
