"""``engine.cuda_graphs`` (issue 42 §2), the part a CPU can check: the fallback rule and its
one-line reasons, bad values refused before training, and a packed local step that never
synchronises with the host."""
from __future__ import annotations

import pytest
import torch

from conftest import build_simulation, compose_config
from fedbn_bench.engine.backends import stacked
from fedbn_bench.engine.graphs import NO_CAPTURE_PATH, SyncProbe, check_mode, fallback_reason, run_reason
from fedbn_bench.errors import ConfigError
from fedbn_bench.runner import run_experiment

CUDA, CPU = torch.device("cuda"), torch.device("cpu")


@pytest.mark.parametrize(("mode", "device", "synchronising", "counts", "reason"), [
    ("auto", CPU, [], [3, 3], "not a CUDA device"),
    ("off", CUDA, [], [3, 3], "engine.cuda_graphs=off"),
    ("auto", CUDA, ["_local_scalar_dense", "nonzero", "_local_scalar_dense"], [3, 3],
     "the local step synchronises with the host (_local_scalar_dense, nonzero)"),
    ("auto", CUDA, [], [3, 2], "the clients take unequal numbers of local steps, so the step's shape changes"),
    ("on", CUDA, [], [3, 3], None),
])
def test_the_fallback_rule_names_the_first_rule_that_fails(mode, device, synchronising, counts, reason):
    assert fallback_reason(mode, device, synchronising, counts) == reason


def test_a_run_names_why_its_steps_are_eager():
    assert run_reason("auto", CPU) == "not a CUDA device"
    assert run_reason("auto", CUDA) == NO_CAPTURE_PATH


@pytest.mark.parametrize(("mode", "device", "message"), [
    ("sometimes", CUDA, "engine.cuda_graphs='sometimes' is unknown; allowed: auto, on, off"),
    ("on", CPU, "engine.cuda_graphs=on needs a CUDA device (device=cpu)"),
])
def test_bad_modes_are_refused(mode, device, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_mode(mode, device)


def test_a_run_asking_for_graphs_on_a_cpu_fails_before_training(tmp_path):
    cfg = compose_config(["device=cpu", "engine.cuda_graphs=on"])
    with pytest.raises(ConfigError, match=r"engine.cuda_graphs=on needs a CUDA device \(device=cpu\)"):
        run_experiment(cfg, tmp_path)
    assert not list(tmp_path.iterdir())


def test_the_probe_sees_host_reads_and_masks_only():
    x = torch.arange(6.0) - 2
    with SyncProbe() as probe:
        y = (x * 2).relu().sum()
    assert probe.calls == []
    with SyncProbe() as probe:
        y.item()
        x[x > 0]
        x.nonzero()
    assert probe.calls == ["_local_scalar_dense", "index", "nonzero"]


def test_a_packed_local_step_never_synchronises(tmp_path, monkeypatch):
    """FedAvg with momentum, weight decay and clipping on a packed Simple-CNN with BatchNorm:
    nothing inside the round's local steps reads a device value on the host."""
    probes = []

    def probed(*args, **kwargs):
        with SyncProbe() as probe:
            stacked_steps(*args, **kwargs)
        probes.append(probe)

    stacked_steps = stacked.run_local_steps
    monkeypatch.setattr(stacked, "run_local_steps", probed)
    sim = build_simulation(["model=simple_cnn", "num_clients=4", "batch_size=8", "algo.local_steps=3", "norm=bn",
                            "algo=fedavg"], tmp_path, rounds=1, dtype=torch.float32, engine="packed")
    assert sim.fed.algo.clip_grad_norm and sim.fed.algo.cfg.momentum
    sim.run_round(0)
    assert len(probes) == 1 and probes[0].calls == []
