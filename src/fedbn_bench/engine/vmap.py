"""``engine=vmap``: every sampled client of a round trains in one vectorized call (torch.func).

PyTorch's "model ensembling" recipe (stacked weights + ``functional_call`` + ``vmap``) on the
stack of ``stacked.py``: one step is
``vmap(grad(loss))(params, frozen, buffers, x, y) -> (grads, (loss, new_buffers))``. The loss
function receives the client's buffers, runs the model on private copies (so a layer's usual
in-place running-statistics update touches only those copies) and returns them; the engine
writes the returned statistics back into the stack. Nothing depends on hidden buffer updates.

Anything this file has not been checked against (``unsupported_reason``) runs on ``loop``.
Dropout draws differ from ``loop`` (same distribution, one draw per stacked step).
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from fedbn_bench.algorithms.base import Algorithm
from fedbn_bench.engine.stacked import StackedTrainer, State, stack_unsupported_reason
from fedbn_bench.norms.base import NormMethod

VMAP_NORMS = ("bn", "gn", "ln", "in", "none", "fedbn", "fedfn", "fixbn", "hbn", "fbn")
"""Norm methods whose layers and hooks were checked under vmap (tests/test_engine_equivalence.py)."""


def unsupported_reason(norm: NormMethod, algo: Algorithm, model: nn.Module, client_steps: list[int]) -> Optional[str]:
    """Why ``engine=vmap`` cannot run this combination, or ``None`` when it can.

    ``client_steps`` are the local steps of every client (``algo.num_steps``) under this run.
    """
    reason = stack_unsupported_reason(norm, algo, model, VMAP_NORMS, "vmap")
    if reason:
        return reason
    name = getattr(norm.cfg, "name", type(norm).__name__)
    if name == "fbn" and len(set(client_steps)) > 1:
        return "FBN layers count local updates in one Python attribute, so vmap needs equal local steps for all clients"
    return None


class VmapTrainer(StackedTrainer):
    """Trains the sampled clients of a round of a ``Simulation`` as one stack (torch.func)."""

    def __init__(self, sim) -> None:
        super().__init__(sim)
        self.step = vmap(grad(self._loss, has_aux=True), randomness="different")

    def _loss(self, trainable: State, frozen: State, buffers: State, x: torch.Tensor, y: torch.Tensor):
        buffers = {k: v.clone() for k, v in buffers.items()}
        loss = F.cross_entropy(functional_call(self.model, (trainable, frozen, buffers), (x,)), y)
        return loss, (loss.detach(), buffers)

    def forward_backward(self, params: State, buffers: State, x: torch.Tensor, y: torch.Tensor, n: int):
        trainable = {k: v[:n] for k, v in params.items() if k in self.trainable}
        frozen = {k: v[:n] for k, v in params.items() if k not in self.trainable}
        active = {k: v[:n] for k, v in buffers.items()}
        grads, (loss, new_buffers) = self.step(trainable, frozen, active, x[:n], y[:n])
        with torch.no_grad():
            for k, v in new_buffers.items():
                buffers[k][:n].copy_(v)
        return grads, loss
