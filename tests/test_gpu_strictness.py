"""What a GPU is strict about, checked on the CPU (``gpu_strict.py``), for every norm method and
every headline family of the CUDA tier (``test_cuda.py``):

1. One round of every norm on ``vmap`` and ``packed`` (dual BN with adversarial training) calls
   ``batch_norm``, ``conv2d`` and ``group_norm`` only with arguments CUDA's kernels accept (1-D
   statistics with one entry per channel, matching convolution groups), and on the backend asked
   for (no fallback).
2. The host synchronisations of a whole run do not grow with the local steps, for each headline
   family on ``loop`` and ``packed``: nothing in the local step reads a tensor's value on the host
   or moves a tensor between devices.
3. Inside the local steps of every norm option and algorithm family on ``packed`` and ``vmap``, the
   operations that carry host data onto the device (``HostTensorCounter``: ``torch.tensor`` of Python
   values, device copies) do not grow with the local steps: a captured CUDA graph may hold none.
"""
from __future__ import annotations

import collections

import pytest
import torch

from conftest import build_simulation, compose_config, watch_local_steps
from gpu_strict import CudaShapeRules, HostSyncCounter, HostTensorCounter
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


STEP_CASES = {
    **{f"norm={norm}": [f"norm={norm}", *NORM_OPTIONS.get(norm, [])] for norm in sorted(NORMS.names())
       if norm not in ("dbn", "fedrbn")},
    **{f"hbn mixing={m}": ["norm=hbn", f"norm.mixing={m}"] for m in ("fixed", "global_only", "batch_only")},
    "hbn moving average": ["norm=hbn", "norm.stats_source=moving_average"],
    "hbn variant=code": ["norm=hbn", "norm.variant=code"],
    "fbn variant=hbn_code": ["norm=fbn", "norm.variant=hbn_code"],
    **{f"algo={a}": ["norm=bn", f"algo={a}"] for a in ("fedprox", "scaffold", "fedadam", "fedsam", "fedacg", "moon")},
    "algo=fedwon": ["norm=none", "algo=fedwon"],
}
"""Every norm option and algorithm family whose local steps a CUDA graph may capture (adversarial training's
dual BNs are never captured: ``engine/graphs.py``)."""


def host_tensors_in_local_steps(overrides: list[str], engine: str, steps: int, tmp_path, monkeypatch):
    counters = watch_local_steps(monkeypatch, HostTensorCounter)
    sim = build_simulation([*BASE, *overrides, f"algo.local_steps={steps}"], tmp_path / str(steps), 1,
                           torch.float32, engine)
    if not isinstance(sim.backend, StackedBackend):
        pytest.skip(f"{overrides} trains on {sim.engine}, which no graph captures")
    sim.run_round(0)
    monkeypatch.undo()
    assert counters, "no local steps ran"
    return sum((c.calls for c in counters), collections.Counter())


@pytest.mark.parametrize("engine", ["packed", "vmap"])
@pytest.mark.parametrize("case", sorted(STEP_CASES))
def test_no_host_data_enters_a_local_step(case, engine, tmp_path, monkeypatch):
    overrides = STEP_CASES[case]
    short = host_tensors_in_local_steps(overrides, engine, 2, tmp_path, monkeypatch)
    long = host_tensors_in_local_steps(overrides, engine, 6, tmp_path, monkeypatch)
    grown = {site: (short[site], n) for site, n in long.items() if n != short[site]}
    assert not grown, f"host data carried onto the device per local step (2 -> 6 steps): {grown}"
