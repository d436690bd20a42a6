"""The SGD step on dicts of tensors, for one client or a stack of clients (leading client axis).

``sgd_step`` is torch.optim.SGD's update (dampening 0, no Nesterov): ``d = g + decay * w``,
``buf = momentum * buf + d``, ``w -= lr * (buf or d)``. Momentum buffers start at zero, which
gives exactly torch's first step (``buf = d``). The same call updates one client's weights
(``engine=loop``) or every active client's slice of a stack in place.

The stacks are large and the update is memory-bound, so parameters whose tensors are dense take
PyTorch's fused SGD kernel (one pass over memory instead of four, and one operation for all of
them). That kernel walks each tensor's memory in order, so it is right only when the weight, its
gradient and its buffer are dense with the same strides (torch 2.x on CPU, measured: max error 0.7
when a permuted weight meets a contiguous gradient): a gradient in another layout is first copied
into the weight's (``same_layout``, checked from the strides, no tensor operation). The other
parameters take the same update in ``foreach`` operations.
"""
from __future__ import annotations

from typing import Optional

import torch

State = dict[str, torch.Tensor]


@torch.no_grad()
def sgd_step(params: State, grads: State, buffers: Optional[State], lr: float, momentum: float,
             decay: float) -> None:
    """One SGD step of the parameters in ``grads`` (others, e.g. frozen ones, are untouched);
    ``buffers`` (same keys, updated in place) are needed when ``momentum != 0``."""
    fused: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    rest = []
    for k, g in grads.items():
        p = params[k]
        if momentum == 0 or not dense(p) or not same_layout(buffers[k], p):
            rest.append(k)
            continue
        if not same_layout(g, p):
            g = torch.empty_like(p).copy_(g)
        fused.append((p, g, buffers[k]))
    if fused:
        weights, directions, bufs = (list(t) for t in zip(*fused))
        torch._fused_sgd_(weights, directions, bufs, weight_decay=decay, momentum=momentum, lr=lr,
                          dampening=0.0, nesterov=False, maximize=False, is_first_step=False)
    if not rest:
        return
    weights = [params[k] for k in rest]
    d = [grads[k] for k in rest]
    if decay != 0:
        d = torch._foreach_add(d, weights, alpha=decay)
    if momentum != 0:
        bufs = [buffers[k] for k in rest]
        torch._foreach_mul_(bufs, momentum)
        torch._foreach_add_(bufs, d)
        d = bufs
    torch._foreach_add_(weights, d, alpha=-lr)


def dense(t: torch.Tensor) -> bool:
    """Whether ``t`` covers its memory exactly once, in some order of its axes (from its strides)."""
    expected = 1
    for stride, size in sorted((t.stride(d), t.shape[d]) for d in range(t.dim()) if t.shape[d] != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def same_layout(t: torch.Tensor, like: torch.Tensor) -> bool:
    """Whether ``t`` has ``like``'s shape and lies in memory as ``like`` does (axes of size 1 aside)."""
    return t.shape == like.shape and all(a == b for a, b, size in zip(t.stride(), like.stride(), t.shape) if size != 1)
