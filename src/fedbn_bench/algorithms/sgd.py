"""The SGD step on dicts of tensors, for one client or a stack of clients (leading client axis).

``sgd_step`` is torch.optim.SGD's update (dampening 0, no Nesterov): ``d = g + decay * w``,
``buf = momentum * buf + d``, ``w -= lr * (buf or d)``. Momentum buffers start at zero, which
gives exactly torch's first step (``buf = d``). The same call updates one client's weights
(``engine=loop``) or every active client's slice of a stack in place.

The stacks are large and the update is memory-bound, so parameters whose tensors are dense take
PyTorch's fused SGD kernel (one pass over memory instead of four). The fused CPU kernel of torch
2.x computes wrong values on non-contiguous tensors (measured: max error 0.7 on a permuted
tensor), so it receives the tensors permuted into their memory order (``memory_order_views``),
where they are contiguous. The other parameters take the same update in ``foreach`` operations.
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
        views = memory_order_views(params[k], g, buffers[k]) if momentum != 0 else None
        if views is None:
            rest.append(k)
        else:
            fused.append(views)
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


def memory_order_views(p: torch.Tensor, g: torch.Tensor, buf: torch.Tensor):
    """``(p, g, buf)`` permuted into ``p``'s memory order, where all three are contiguous (the
    gradient is first copied into ``p``'s layout if it has another); ``None`` if ``p`` or ``buf``
    is not dense."""
    order = sorted(range(p.dim()), key=lambda d: -p.stride(d))
    if not p.permute(order).is_contiguous() or not buf.permute(order).is_contiguous():
        return None
    if not g.permute(order).is_contiguous():
        g = torch.empty_like(p).copy_(g)
    return p.permute(order), g.permute(order), buf.permute(order)
