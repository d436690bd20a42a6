"""The CUDA tier (``pytest -m cuda``): the engine on a GPU against the same engine on the CPU.

Skipped, with the reason, where ``torch.cuda.is_available()`` is false, so the default run on a CPU is
unchanged. ``scripts/gpu_check.sh`` runs it on a lent GPU. ``FEDBN_TEST_DEVICE=cpu pytest -m cuda``
runs the same tests with the CPU standing in for the GPU: that checks the tier's own logic on a
machine without one (every comparison is then exact, and the synchronisation count is zero).

1. One round of every norm × engine × {FedAvg, DSGD, FedAdam (a server optimizer), SCAFFOLD} on the
   device equals the round on the CPU, in float64: data, sampling and initialization are the same, so
   only the kernels' rounding differs (``TOLERANCE``).
2. A whole run of each paper's headline family on the device completes with full records, and
   the number of host synchronisations per round does not grow with the local steps (counted with
   ``torch.cuda.set_sync_debug_mode("warn")``): no ``.item()`` or host copy per step in the hot loop.
3. Two rounds with the local step captured as a CUDA graph and replayed (``engine.cuda_graphs=auto``,
   ``engine/graphs.py``) equal the eager rounds on the device, for every norm (but the adversarial
   dual BNs, which are not captured) × the algorithms of case 1 on ``packed``; on the CPU stand-in
   the traced graph (``emulate``) takes the GPU's part.
4. A checkpoint written on the device resumes on the CPU and the reverse: the restored state equals
   the saved one exactly, and the resumed run ends where the uninterrupted one does.
"""
from __future__ import annotations

import os
import warnings

import pandas as pd
import pytest
import torch

from conftest import build_simulation, compose_config
from fedbn_bench.engine import checkpoint as ckpt
from fedbn_bench.norms import NORMS
from fedbn_bench.runner import run_experiment
from test_resume import stop_at

DEVICE = os.environ.get("FEDBN_TEST_DEVICE", "cuda")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(),
                       reason="needs a CUDA GPU (torch.cuda.is_available() is false); "
                              "FEDBN_TEST_DEVICE=cpu runs the tier on the CPU"),
]

BASE = ["model=simple_cnn", "num_clients=6", "clients_per_round=3", "batch_size=16", "alpha=0.3", "lr=0.05"]
TOLERANCE = {"rtol": 1e-7, "atol": 1e-9}
"""float64 on the GPU against float64 on the CPU after one round: cuDNN's and cuBLAS's summation
orders differ from the CPU's, which leaves differences of about 1e-13 per kernel; 1e-7 relative
still catches any masking, ordering or statistics error, which is of the order of the values."""
PGD = ["adversarial=pgd_at", "adversarial.steps=1", "adversarial.random_start=false"]
NORM_OPTIONS = {"fixbn": ["norm.freeze_fraction=0.5"], "dbn": PGD, "fedrbn": PGD}
"""Dual BN trains its adversarial users on PGD examples; PGD's random start draws from the device's own
generator, whose stream differs from the CPU's, so the equality test starts PGD at the clean input."""
ALGORITHMS = ["algo=fedavg", "algo=dsgd", "algo=fedadam", "algo=scaffold"]


def one_round(device: str, overrides: list[str], engine: str, tmp_path) -> dict[str, torch.Tensor]:
    sim = build_simulation([*BASE, *overrides], tmp_path / device, 1, torch.float64, engine, device=device)
    sim.run_round(0)
    return {k: v.detach().cpu() for k, v in sim.store.global_state.items()}


@pytest.mark.parametrize("algo", ALGORITHMS)
@pytest.mark.parametrize("engine", ["loop", "vmap", "packed"])
@pytest.mark.parametrize("norm", NORMS.names())
def test_one_round_on_the_device_equals_the_cpu(norm, engine, algo, tmp_path):
    overrides = [f"norm={norm}", *NORM_OPTIONS.get(norm, []), algo]
    on_cpu = one_round("cpu", overrides, engine, tmp_path)
    on_device = one_round(DEVICE, overrides, engine, tmp_path)
    assert on_cpu.keys() == on_device.keys()
    for key in on_cpu:
        torch.testing.assert_close(on_device[key], on_cpu[key], **TOLERANCE, msg=key)


GRAPHS = "emulate" if DEVICE == "cpu" else "auto"


def two_rounds(overrides: list[str], mode: str, tmp_path):
    sim = build_simulation([*BASE, "algo.local_steps=4", *overrides], tmp_path / mode, 2, torch.float64, "packed",
                           device=DEVICE, cuda_graphs=mode)
    sim.run_round(0)
    sim.run_round(1)
    return sim, {k: v.detach().cpu() for k, v in sim.store.global_state.items()}


@pytest.mark.parametrize("algo", ALGORITHMS)
@pytest.mark.parametrize("norm", [n for n in NORMS.names() if n not in ("dbn", "fedrbn")])
def test_a_graphed_round_equals_the_eager_round_on_the_device(norm, algo, tmp_path):
    overrides = [f"norm={norm}", *NORM_OPTIONS.get(norm, []), algo]
    _, eager = two_rounds(overrides, "off", tmp_path)
    sim, graphed = two_rounds(overrides, GRAPHS, tmp_path)
    assert sim.backend.ctx.cuda_graphs == GRAPHS and not sim.backend.eager_reasons
    replayed = {"algo=dsgd": 0}.get(algo, 2 * (3 if GRAPHS == "auto" else 2))  # 4 steps: 1 warm, 1 captured
    assert sim.graph_record.replays == replayed, sim.graph_record
    for key in eager:
        torch.testing.assert_close(graphed[key], eager[key], **TOLERANCE, msg=key)


def test_graphed_rounds_keep_the_memory_reserved_flat(tmp_path):
    """20 graphed rounds: every round replays, and the run's one graph pool is reused from round to round
    (``memory_reserved`` after round 20 no larger than after round 5)."""
    sim = build_simulation([*BASE, "algo.local_steps=4", "norm=bn"], tmp_path, 20, torch.float32, "packed",
                           device=DEVICE, cuda_graphs=GRAPHS)
    reserved = []
    for r in range(20):
        sim.run_round(r)
        reserved.append(torch.cuda.memory_reserved() if DEVICE == "cuda" else 0)
    record = sim.graph_record
    assert (record.rounds_replayed, record.replays) == (20, 20 * (3 if GRAPHS == "auto" else 2)), record
    assert reserved[-1] <= reserved[4], f"memory reserved per round (bytes): {reserved}"


HEADLINE = {
    "fbn_byzantine": ["norm=fbn", "algo=dsgd", "byzantine.f=2", "byzantine.attack=sf", "byzantine.defense=median",
                      "byzantine.nnm=true", "clients_per_round=6"],
    "hbn": ["preset=hbn", "norm=hbn", "batch_size=16"],
    "fixbn": ["preset=fixbn", "norm=fixbn"],
    "fedbn_domains": ["preset=fedbn", "partition=domains", "partition.num_domains=3", "partition.clients_per_domain=2",
                      "norm=fedbn"],
    "fedrbn": ["norm=fedrbn", "adversarial=pgd_at", "adversarial.at_fraction=0.5", "adversarial.steps=2",
               "adversarial.eval_attacks.0.steps=2"],
}


def synchronisations(overrides: list[str], tmp_path) -> tuple[dict, int]:
    """The run's summary and the host synchronisations the device reported while it ran."""
    if DEVICE != "cuda":
        return run_experiment(compose_config(overrides), tmp_path), 0
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            summary = run_experiment(compose_config(overrides), tmp_path)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return summary, sum("synchroniz" in str(w.message) for w in caught)


@pytest.mark.parametrize("family", sorted(HEADLINE))
def test_headline_run_on_the_device_completes_without_per_step_synchronisation(family, tmp_path):
    common = [*BASE, *HEADLINE[family], f"device={DEVICE}", "rounds=2", "eval_every=1", "progress=false",
              "checkpoint_every=0"]
    short, short_syncs = synchronisations([*common, "algo.local_steps=2"], tmp_path / "short")
    long, long_syncs = synchronisations([*common, "algo.local_steps=6"], tmp_path / "long")
    for summary, run_dir in ((short, tmp_path / "short"), (long, tmp_path / "long")):
        assert summary["status"] == "completed" and summary["rounds_completed"] == 2
        rows = pd.read_csv(run_dir / "metrics.csv")
        assert list(rows["round"]) == [1, 2] and rows["test_acc"].notna().all()
    assert long_syncs == short_syncs, f"host synchronisations grow with local steps: {short_syncs} -> {long_syncs}"


@pytest.mark.parametrize(("saved_on", "resumed_on"), [(DEVICE, "cpu"), ("cpu", DEVICE)])
def test_a_checkpoint_moves_between_the_device_and_the_cpu(saved_on, resumed_on, tmp_path, monkeypatch):
    common = [*BASE, "norm=fbn", "rounds=4", "eval_every=1", "progress=false", "checkpoint_every=2",
              "algo.local_steps=2"]
    whole = run_experiment(compose_config([*common, f"device={saved_on}"]), tmp_path / "whole")
    with monkeypatch.context() as m:
        stop_at(m, 2)
        run_experiment(compose_config([*common, f"device={saved_on}"]), tmp_path / "cut")
    saved = torch.load(tmp_path / "cut" / ckpt.FILENAME, map_location="cpu", weights_only=True)
    saved.pop("sha256")  # the file's checksum, checked and dropped by load_checkpoint
    loaded = ckpt.load_checkpoint(tmp_path / "cut", torch.device(resumed_on))
    assert saved["rounds_completed"] == loaded["rounds_completed"] == 2
    flat_saved, flat_loaded = flatten(saved), flatten(loaded)
    assert flat_saved.keys() == flat_loaded.keys()
    for key, value in flat_loaded.items():
        if isinstance(value, torch.Tensor):
            assert value.device.type == torch.device(resumed_on).type or value.device.type == "cpu", key
            assert torch.equal(value.cpu(), flat_saved[key]), key
    resumed = run_experiment(compose_config([*common, f"device={resumed_on}", f"resume={tmp_path / 'cut'}"]),
                             tmp_path / "elsewhere")
    assert resumed["status"] == "completed" and resumed["rounds_completed"] == 4
    assert abs(resumed["final_test_acc"] - whole["final_test_acc"]) <= 0.02


def flatten(tree, prefix: str = "") -> dict:
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in flatten(sub, f"{prefix}{key}.").items()}
    if isinstance(tree, (list, tuple)):
        return {k: v for i, sub in enumerate(tree) for k, v in flatten(sub, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): tree}
