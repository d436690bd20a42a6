"""ATen operation counts: how many operations the host issues, the cost of a launch-bound step.

A small local step (HBN's Simple-CNN at B = 4) is bound by the host issuing operations, not by
the arithmetic: each ATen call costs microseconds of Python and dispatcher time on the host (and
a kernel launch on a GPU) whatever its size. ``OpCounter`` is a ``TorchDispatchMode`` that counts
every ATen call that reaches the dispatcher below autograd (forward, backward and optimizer alike)
by its overload packet name (``aten.permute``, ``aten.convolution``, ...). The counts are
deterministic for a given program and device, so a test can hold a step to an operation budget.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode


class OpCounter(TorchDispatchMode):
    """Counts the ATen operations run inside it (``counts``: name -> calls; ``total``)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        """All operations counted so far."""
        return sum(self.counts.values())
