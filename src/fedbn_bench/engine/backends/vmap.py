"""``engine=vmap``: every sampled client of a round trains in one vectorized call (torch.func).

PyTorch's "model ensembling" recipe (stacked weights + ``functional_call`` + ``vmap``) on the
stack of ``stacked.py``: one step is
``vmap(grad(loss))(params, frozen, buffers, x, y) -> (grads, (loss, new_buffers))``, with the
algorithm's own ``loss``. The loss function runs the model on private copies of the client's
buffers (so a layer's in-place statistics update touches only those copies) and returns them;
the backend writes them back into the stack. Nothing depends on hidden buffer updates. Dropout
draws differ from ``loop`` (same distribution, one draw per stacked step).
"""
from __future__ import annotations

import torch
from torch.func import functional_call, grad, vmap

from fedbn_bench.core.trees import prefix
from fedbn_bench.core.updates import State
from fedbn_bench.engine.backends.base import TrainingContext
from fedbn_bench.engine.backends.stacked import StackedBackend


class VmapBackend(StackedBackend):
    def __init__(self, ctx: TrainingContext) -> None:
        super().__init__(ctx)
        self.step = vmap(grad(self._loss, has_aux=True), randomness="different")
        self.forward = vmap(self._logits, randomness="different")
        self.runner = ctx.model
        self.buffer_keys = {k for k, _ in ctx.model.named_buffers()}

    def _logits(self, state: State, x: torch.Tensor):
        own = {k: v.clone() if k in self.buffer_keys else v for k, v in state.items()}
        return functional_call(self.ctx.model, own, (x,)), {k: own[k] for k in self.buffer_keys}

    def logits(self, state: State, x: torch.Tensor) -> torch.Tensor:
        """The vmapped forward (differentiable by ordinary autograd); the new buffers are written
        back into ``state``'s."""
        out, new_buffers = self.forward(state, x)
        with torch.no_grad():
            for k, v in new_buffers.items():
                state[k].copy_(v)
        return out

    def _loss(self, trainable: State, frozen: State, buffers: State, x: torch.Tensor, y: torch.Tensor):
        buffers = {k: v.clone() for k, v in buffers.items()}
        loss = self.ctx.algo.loss(functional_call(self.ctx.model, (trainable, frozen, buffers), (x,)), y)
        return loss, (loss.detach(), buffers)

    def forward_backward(self, params: State, buffers: State, x: torch.Tensor, y: torch.Tensor, n: int):
        trainable = {k: v for k, v in params.items() if k in self.trainable}
        frozen = {k: v for k, v in params.items() if k not in self.trainable}
        active = prefix(buffers, n)
        grads, (loss, new_buffers) = self.step(trainable, frozen, active, x, y)
        with torch.no_grad():
            for k, v in new_buffers.items():
                buffers[k][:n].copy_(v)
        return grads, loss
