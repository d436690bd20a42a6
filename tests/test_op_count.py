"""ATen operations per local step (issue 42 §1): the counter, and the budget of a packed step.

A small local step is bound by the host issuing operations, so their number is held to a budget
like a result: one round of ``scripts/bench.py``'s ``hbn_cifar10`` preset (Simple-CNN, 10 clients,
B = 4, 125 local steps) on ``engine=packed``, counted on the CPU, where the count is deterministic.
"""
from __future__ import annotations

import torch

from fedbn_bench.engine.op_count import OpCounter

PACKED_STEP_BUDGET = 150
"""Issue 42's target for a packed step of hbn_cifar10 (384 before it)."""


def test_the_counter_counts_each_aten_call_by_name():
    x = torch.ones(3)
    with OpCounter() as ops:
        y = (x + 1) * x
        y.sum()
    assert (ops.counts["add"], ops.counts["mul"], ops.counts["sum"]) == (1, 1, 1)
    assert ops.total == sum(ops.counts.values()) == 3


def packed_round_ops(bench) -> tuple[int, int]:
    """ATen operations of a round of hbn_cifar10 on ``engine=packed`` (the first: a later one
    differs by the one-time tensors of the backend, 1 of 18,000), and its local steps."""
    preset = bench.PRESETS["hbn_cifar10"]
    cfg = bench.compose_config(preset, ["engine=packed"])
    sim, backend = bench.engine_rounds(preset, cfg, torch.device("cpu"), "packed", 1)
    assert backend == "packed"
    with OpCounter() as ops:
        sim.run_round(0)
    return ops.total, bench.local_steps(preset, cfg)


def test_a_packed_step_of_hbn_cifar10_stays_within_its_operation_budget(bench):
    total, steps = packed_round_ops(bench)
    assert steps == 125
    assert total / steps <= PACKED_STEP_BUDGET, f"{total / steps:.1f} ATen operations per packed step"
