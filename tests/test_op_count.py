"""ATen operations per local step (issue 42 §1): the counter behind ``scripts/bench.py``'s column."""
from __future__ import annotations

import torch

from fedbn_bench.engine.op_count import OpCounter

def test_the_counter_counts_each_aten_call_by_name():
    x = torch.ones(3)
    with OpCounter() as ops:
        y = (x + 1) * x
        y.sum()
    assert (ops.counts["add"], ops.counts["mul"], ops.counts["sum"]) == (1, 1, 1)
    assert ops.total == sum(ops.counts.values()) == 3
