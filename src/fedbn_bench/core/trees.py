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
    client). In-place updates of the views land in the stack."""
    if n is None:
        return tree
    return tree_map(lambda t: t[:n], tree)


def per_client(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``value`` (shape ``()`` for one client, ``(n,)`` for a stack) shaped to broadcast against
    ``like`` (``(...)`` or ``(n, ...)``)."""
    return value.reshape(value.shape + (1,) * (like.dim() - value.dim()))


def total_norm(tensors: dict[str, torch.Tensor], lead: int) -> torch.Tensor:
    """Each client's L2 norm over all of ``tensors`` (``lead`` = 0: one client, a scalar; 1: a
    stack, shape ``(n,)``): the norm of the per-tensor norms, as ``torch.nn.utils.clip_grad_norm_``
    computes it. Each norm is one reduction over the tensor as it lies in memory, with no squared
    or flattened copy (the gradients of a large linear layer are tens of MB per step)."""
    per_tensor = [torch.linalg.vector_norm(t, dim=tuple(range(lead, t.dim())) if lead else None)
                  for t in tensors.values()]
    return torch.linalg.vector_norm(torch.stack(per_tensor), dim=0)
