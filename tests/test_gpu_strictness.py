"""What a GPU is strict about, checked on the CPU (``gpu_strict.py``), for every norm method and
every headline family of the CUDA tier (``test_cuda.py``):

1. One round of every norm on ``vmap`` and ``packed`` (dual BN with adversarial training) calls
   ``batch_norm``, ``conv2d`` and ``group_norm`` only with arguments CUDA's kernels accept (1-D
   statistics with one entry per channel, matching convolution groups), and on the backend asked
   for (no fallback).
2. The host synchronisations of a whole run do not grow with the local steps, for each headline
   family on ``loop`` and ``packed``: nothing in the local step reads a tensor's value on the host
   or moves a tensor between devices.
"""
from __future__ import annotations

import pytest
import torch

from conftest import build_simulation, compose_config
from gpu_strict import CudaShapeRules, HostSyncCounter
from fedbn_bench.engine.backends.stacked import StackedBackend
from fedbn_bench.norms import NORMS
from fedbn_bench.runner import run_experiment
from test_cuda import BASE, HEADLINE, NORM_OPTIONS


@pytest.mark.parametrize("engine", ["vmap", "packed"])
@pytest.mark.parametrize("norm", sorted(NORMS.names()))
def test_every_norm_calls_the_kernels_as_cuda_requires(norm, engine, tmp_path):
    sim = build_simulation([*BASE, f"norm={norm}", *NORM_OPTIONS.get(norm, [])], tmp_path, 1, torch.float32, engine)
    assert isinstance(sim.backend, StackedBackend)
    with CudaShapeRules() as rules:
        sim.run_round(0)
    assert rules.checked["conv2d"] > 0, "the round ran no convolution: nothing was checked"


def run_syncs(overrides: list[str], tmp_path) -> HostSyncCounter:
    with HostSyncCounter() as counter:
        summary = run_experiment(compose_config(overrides), tmp_path)
    assert summary["status"] == "completed", summary
    return counter


@pytest.mark.parametrize("engine", ["loop", "packed"])
@pytest.mark.parametrize("family", sorted(HEADLINE))
def test_host_synchronisations_do_not_grow_with_the_local_steps(family, engine, tmp_path):
    common = [*BASE, *HEADLINE[family], "device=cpu", "rounds=2", "eval_every=1", "progress=false",
              "checkpoint_every=0", "logger=none", f"engine={engine}"]
    short = run_syncs([*common, "algo.local_steps=2"], tmp_path / "short")
    long = run_syncs([*common, "algo.local_steps=6"], tmp_path / "long")
    grown = {site: (short.calls[site], n) for site, n in long.calls.items() if n != short.calls[site]}
    assert not grown, f"host synchronisations that grow with the local steps (2 -> 6 steps): {grown}"
