"""Per-paper presets (audit #5): each composes to its paper's optimizer and training details, a
command-line override still wins, and each runs end to end at a tiny scale."""
from __future__ import annotations

import pytest

from conftest import compose_config
from fedbn_bench.algorithms.schedules import learning_rate
from fedbn_bench.runner import run_experiment


def test_fedbn_preset_is_plain_sgd():
    cfg = compose_config(["preset=fedbn", "norm=fedbn"])
    a = cfg.algo
    assert (cfg.lr, cfg.batch_size, a.momentum, a.weight_decay, a.clip_grad_norm) == (0.01, 32, 0.0, 0.0, None)
    assert cfg.norm.weighting == "uniform"


def test_hbn_preset_clips_and_decays_per_round():
    cfg = compose_config(["preset=hbn"])
    a = cfg.algo
    assert (a.name, a.momentum, a.weight_decay, a.clip_grad_norm, cfg.batch_size) == ("fedavg", 0.9, 0.0, 10, 4)
    assert learning_rate(cfg.lr, a.schedule, 2, 100) == pytest.approx(0.01 * 0.998**2)
    assert cfg.partition.scheme == "per_class" and cfg.small_clients == "skip"


def test_fixbn_preset_steps_multistep_and_hsu_dirichlet():
    cfg = compose_config(["preset=fixbn", "dataset=cifar10"])
    a = cfg.algo
    assert (a.momentum, a.weight_decay, a.local_steps, a.clip_grad_norm) == (0.9, 1e-4, 100, None)
    assert [learning_rate(0.02, a.schedule, r, 100) for r in (49, 50, 75)] == pytest.approx([0.02, 0.002, 0.0002])
    assert cfg.partition.scheme == "per_client" and cfg.dataset.options.crop_padding == 2


def test_fbn_preset_is_dsgd_with_momentum_from_zero():
    cfg = compose_config(["preset=fbn"])
    a = cfg.algo
    assert (a.name, a.client_momentum, a.momentum_start, cfg.batch_size, cfg.rounds) == ("dsgd", 0.99, "zero", 50, 3000)
    assert [learning_rate(0.1, a.schedule, r, 3000) for r in (999, 1000, 2000)] == pytest.approx([0.1, 0.05, 0.033])


def test_command_line_overrides_win_over_a_preset():
    cfg = compose_config(["preset=hbn", "lr=0.32", "algo.clip_grad_norm=5"])
    assert cfg.algo.lr == 0.32 and cfg.algo.clip_grad_norm == 5


@pytest.mark.parametrize("preset", ["fedbn", "hbn", "fixbn", "fbn"])
def test_every_preset_runs(tmp_path, preset):
    cfg = compose_config([f"preset={preset}", "rounds=2", "batch_size=8", "algo.local_steps=2"
                          if preset == "fixbn" else "eval_every=1", "num_clients=4"])
    assert run_experiment(cfg, tmp_path)["status"] == "completed"
