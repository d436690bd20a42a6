"""Per-client tensor trees: nested dicts of tensors, for one client or a stack of clients.

The algorithms' client updates and the norms' hooks are written on such trees so that the same
code runs for one client (``engine=loop``: plain tensors) and for a stack (``vmap``, ``packed``:
a leading client axis). These helpers unstack and slice them (``engine/backends/stacked.py`` stacks them in its layouts), and expand a per-client
value so that it broadcasts against a per-client tensor either way.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch

Tree = Any
"""A tensor, or a dict (nested) of trees."""


def tree_map(fn: Callable[[torch.Tensor], torch.Tensor], tree: Tree) -> Tree:
    if isinstance(tree, dict):
        return {k: tree_map(fn, v) for k, v in tree.items()}
    return fn(tree)


def unstack_tree(tree: Tree, i: int) -> Tree:
    """Client ``i``'s own copy of a stacked tree."""
    return tree_map(lambda t: t[i].clone(), tree)


def prefix(tree: Tree, n: Optional[int]) -> Tree:
    """Views of the first ``n`` clients of a stacked tree (``n=None``: the tree itself, one
    client); a stack of exactly ``n`` clients is itself, so that a step of every client issues no
    slicing operations. In-place updates of the views land in the stack."""
    if n is None:
        return tree
    return tree_map(lambda t: t if len(t) == n else t[:n], tree)


def per_client(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``value`` (shape ``()`` for one client, ``(n,)`` for a stack) shaped to broadcast against
    ``like`` (``(...)`` or ``(n, ...)``)."""
    return value.reshape(value.shape + (1,) * (like.dim() - value.dim()))


def total_norm(tensors: dict[str, torch.Tensor], lead: int) -> torch.Tensor:
    """Each client's L2 norm over all of ``tensors`` (``lead`` = 0: one client, a scalar; 1: a
    stack, shape ``(n,)``): the norm of the per-tensor norms, as ``torch.nn.utils.clip_grad_norm_``
    computes it, in few operations (a step is bound by the host issuing them): one client's
    tensors in one ``foreach`` norm; a stack's per-channel tensors ``(n, C)`` (biases, norm
    layers' affine parameters) concatenated into one norm, each larger tensor reduced as it lies
    in memory, with no squared or flattened copy (the gradients of a large linear layer are tens
    of MB per step)."""
    values = list(tensors.values())
    if not lead:
        return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(values)))
    per_channel = [t for t in values if t.dim() == 2]
    norms = [torch.linalg.vector_norm(t, dim=tuple(range(1, t.dim()))) for t in values if t.dim() != 2]
    if per_channel:
        norms.append(torch.linalg.vector_norm(torch.cat(per_channel, dim=1), dim=1))
    return torch.linalg.vector_norm(torch.stack(norms), dim=0)
