"""FixBN's analyses as metrics (Fig. 2a/2b: ``bn_statistics_drift``; Fig. 2c: ``global_train_loss``;
§3.4: ``pooled_bn``), hand-computed on tiny float64 models: the statistics of Eq. 1's cumulative
average on the pooled data, mini-batch statistics against the global ones, the sliding window, the
run's model and buffers left as they were; a run writing the columns; the presets and declarations."""
from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from torch import nn

from conftest import CONF, build_simulation, compose_config
from fedbn_bench.errors import ConfigError
from fedbn_bench.figures.catalog import CATALOG
from fedbn_bench.figures.cli import draw
from fedbn_bench.metrics.base import EvalContext, build_metric, evaluate, seeded_generator
from fedbn_bench.metrics.bn_statistics_drift import BNStatisticsDrift
from fedbn_bench.metrics.global_train_loss import GlobalTrainLoss
from fedbn_bench.metrics.pooled_bn import SHUFFLE_STREAM, PooledBN, reestimate
from fedbn_bench.norms.fbn import FederatedBatchNorm2d
from fedbn_bench.norms.fixbn import FixBatchNorm2d
from fedbn_bench.runner import run_experiment
from test_make_figures import make_run

ROOT = CONF.parent


def randomize_bn(model: nn.Module) -> nn.Module:
    """Non-trivial running statistics and affine parameters in every BN layer."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.normal_()
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_()
    return model


def one_bn(norm: type[nn.Module] = nn.BatchNorm2d) -> nn.Sequential:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), norm(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(4, 3))
    return randomize_bn(model.double()).eval()


def two_bn() -> nn.Sequential:
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 5, 3, padding=1),
                          nn.BatchNorm2d(5), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(5, 3), nn.Dropout(0.5))
    return randomize_bn(model.double()).eval()


def data(n: int = 34, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, 5, 5, generator=g, dtype=torch.float64), torch.randint(0, 3, (n,), generator=g)


def context(model: nn.Module, state: list[dict], clients: list[torch.Tensor], batch: int = 8) -> EvalContext:
    """An evaluation context whose global state is ``state[0]`` (replaceable between calls)."""
    x, y = data()
    test_x, test_y = data(20, seed=1)
    return EvalContext(model=model, test_x=test_x, test_y=test_y, load_global=lambda: model.load_state_dict(state[0]),
                       load_client=lambda c: None, client_test=[None] * len(clients), batch_size=7, train_x=x,
                       train_y=y, client_train=clients, train_batch_size=batch, seed=3)


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def assert_untouched(model: nn.Module, state: dict[str, torch.Tensor], training: bool = False) -> None:
    assert model.training is training
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key]), key
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            assert m.momentum == 0.1 and "forward" not in vars(m)


POOLED = [torch.arange(0, 10), torch.arange(10, 30)]
"""Two clients; samples 30-33 of ``data()`` belong to none (shifted by +100 where it matters)."""


def pooled_inputs(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The first BN layer's inputs on the pooled samples: the first convolution's outputs."""
    with torch.no_grad():
        return model[0](x[torch.cat(POOLED)])


def shifted_data() -> tuple[torch.Tensor, torch.Tensor]:
    x, y = data()
    x[30:] += 100.0
    return x, y


def test_pooled_reestimation_is_the_mean_of_the_inputs_over_the_pooled_samples():
    model = one_bn()
    x, y = shifted_data()
    h = pooled_inputs(model, x)
    idx = torch.cat(POOLED)
    whole = reestimate(model, x, y, idx, 30, seeded_generator(0, 1))[1]
    torch.testing.assert_close(whole.running_mean, h.mean((0, 2, 3)), rtol=0, atol=1e-12)
    torch.testing.assert_close(whole.running_var, h.var((0, 2, 3), unbiased=True), rtol=0, atol=1e-12)
    equal = reestimate(model, x, y, idx, 10, seeded_generator(0, 1))[1]  # three batches of 10: the same mean
    assert equal.num_batches_tracked.item() == 3
    torch.testing.assert_close(equal.running_mean, h.mean((0, 2, 3)), rtol=0, atol=1e-12)


def test_unequal_batches_weigh_each_batch_alike_and_a_single_sample_batch_is_skipped():
    """Batches 8, 8, 8, 6: torch's cumulative average is the mean of the four batch means (not the
    pooled mean); batches 29, 1: the last one adds nothing."""
    model = one_bn()
    x, y = shifted_data()
    seen = []
    hook = nn.modules.module.register_module_forward_pre_hook(
        lambda m, inputs: seen.append(inputs[0].detach().clone()) if isinstance(m, nn.BatchNorm2d) else None)
    try:
        bn = reestimate(model, x, y, torch.cat(POOLED), 8, seeded_generator(0, 1))[1]
    finally:
        hook.remove()
    assert [len(b) for b in seen] == [8, 8, 8, 6]
    pooled = pooled_inputs(model, x).mean((0, 2, 3))
    torch.testing.assert_close(torch.cat(seen).mean((0, 2, 3)), pooled, rtol=0, atol=1e-12)   # the pooled samples
    batch_means = torch.stack([b.mean((0, 2, 3)) for b in seen]).mean(0)
    torch.testing.assert_close(bn.running_mean, batch_means, rtol=0, atol=1e-12)
    assert (bn.running_mean - pooled).abs().max() > 1e-4   # not the pooled mean
    batch_vars = torch.stack([b.var((0, 2, 3), unbiased=True) for b in seen]).mean(0)
    torch.testing.assert_close(bn.running_var, batch_vars, rtol=0, atol=1e-12)
    skipped = reestimate(model, x, y, torch.cat(POOLED), 29, seeded_generator(0, 1))[1]
    assert skipped.num_batches_tracked.item() == 1


def test_pooled_bn_tests_the_reestimated_copy_and_leaves_the_run_model_alone():
    model = one_bn()
    state = [snapshot(model)]
    ctx = context(model, state, POOLED)
    ctx.train_x[30:] += 100.0
    row = PooledBN(batch_size=30)(ctx)
    assert_untouched(model, state[0])
    h = pooled_inputs(model, ctx.train_x)
    expected = one_bn()
    with torch.no_grad():
        expected[1].running_mean.copy_(h.mean((0, 2, 3)))
        expected[1].running_var.copy_(h.var((0, 2, 3), unbiased=True))
    acc, loss = evaluate(expected, ctx.test_x, ctx.test_y)
    assert row["pooled_bn_test_acc"] == acc
    assert row["pooled_bn_test_loss"] == pytest.approx(loss, rel=1e-12)
    assert PooledBN()(ctx) == PooledBN(batch_size=8)(ctx)   # default: the run's training batch size (8)


def test_pooled_bn_per_layer_logs_the_averaged_and_the_pooled_variance_of_each_layer():
    """FixBN §3.4: ``avg_var_<layer>`` is the global model's running variance (the average the server
    holds), ``pooled_var_<layer>`` the variance re-estimated on the pooled samples; channel means."""
    model = one_bn()
    state = [snapshot(model)]
    ctx = context(model, state, POOLED)
    ctx.train_x[30:] += 100.0
    row = PooledBN(batch_size=30, per_layer=True)(ctx)
    h = pooled_inputs(model, ctx.train_x)
    assert row["avg_var_1"] == pytest.approx(state[0]["1.running_var"].mean().item(), rel=1e-12)
    assert row["pooled_var_1"] == pytest.approx(h.var((0, 2, 3), unbiased=True).mean().item(), rel=1e-12)
    assert row["avg_var_1"] != pytest.approx(row["pooled_var_1"])
    assert set(PooledBN(batch_size=30)(ctx)) == {"pooled_bn_test_acc", "pooled_bn_test_loss"}
    with pytest.raises(ConfigError, match="per_layer"):
        PooledBN(per_layer="yes")


def test_pooled_bn_shuffles_with_the_run_seed_only():
    model = one_bn()
    x, y = shifted_data()
    a = reestimate(model, x, y, torch.cat(POOLED), 8, seeded_generator(3, SHUFFLE_STREAM))[1].running_mean
    b = reestimate(model, x, y, torch.cat(POOLED), 8, seeded_generator(3, SHUFFLE_STREAM))[1].running_mean
    c = reestimate(model, x, y, torch.cat(POOLED), 8, seeded_generator(4, SHUFFLE_STREAM))[1].running_mean
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_fixbn_stage_two_layers_are_reestimated_too():
    model = one_bn(FixBatchNorm2d)
    model[1].use_global_stats = True
    x, y = shifted_data()
    bn = reestimate(model, x, y, torch.cat(POOLED), 30, seeded_generator(0, 1))[1]
    torch.testing.assert_close(bn.running_mean, pooled_inputs(model, x).mean((0, 2, 3)), rtol=0, atol=1e-12)


@pytest.mark.parametrize("norm, message", [(FederatedBatchNorm2d, "torch BatchNorm layers only"),
                                           (lambda c: nn.GroupNorm(2, c), "has none")])
def test_pooled_bn_refuses_other_statistics_layers_and_models_without_bn(norm, message):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), norm(4), nn.Flatten(), nn.Linear(36, 3)).double()
    with pytest.raises(ConfigError, match=message):
        PooledBN()(context(model, [snapshot(model)], POOLED))


def test_global_train_loss_is_the_global_model_on_the_clients_training_samples():
    model = two_bn()
    state = [snapshot(model)]
    ctx = context(model, state, [torch.arange(0, 10), torch.arange(20, 30)])
    idx = torch.cat([torch.arange(0, 10), torch.arange(20, 30)])
    with torch.no_grad():
        logits = model(ctx.train_x[idx])
    row = GlobalTrainLoss()(ctx)
    assert row["global_train_loss"] == pytest.approx(F.cross_entropy(logits, ctx.train_y[idx]).item(), rel=1e-12)
    assert row["global_train_acc"] == pytest.approx((logits.argmax(1) == ctx.train_y[idx]).double().mean().item())
    sub = idx[[0, 5, 10, 15]]   # 4 of 20, evenly spaced: positions 0, 5, 10, 15
    row = GlobalTrainLoss(max_samples=4)(ctx)
    assert row["global_train_loss"] == pytest.approx(F.cross_entropy(logits[[0, 5, 10, 15]],
                                                                     ctx.train_y[sub]).item(), rel=1e-12)
    assert_untouched(model, state[0])


def manual_statistics(model: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """``S_B`` of ``two_bn`` by hand: each BN's input mean and unbiased variance, the first BN
    normalizing with the batch's own statistics before the second convolution."""
    with torch.no_grad():
        h1 = model[0](x)
        z = F.relu(F.batch_norm(h1, None, None, model[1].weight, model[1].bias, training=True, eps=model[1].eps))
        h2 = model[3](z)
    dims = (0, 2, 3)
    return torch.cat([h1.mean(dims), h1.var(dims), h2.mean(dims), h2.var(dims)])


def running(state: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([state[f"{layer}.{s}"] for layer in ("1", "4") for s in ("running_mean", "running_var")])


def test_drift_distances_change_and_windowed_variance_by_hand():
    model = two_bn()
    clients = [torch.arange(0, 6), torch.arange(6, 12)]   # batch 8 >= 6: a client's batch is all its samples
    first = snapshot(model)
    state = [first]
    ctx = context(model, state, clients, batch=8)
    metric = BNStatisticsDrift(window=2)
    local = []

    def check(row: dict[str, float], global_state: dict[str, torch.Tensor]) -> None:
        reference = two_bn()
        reference.load_state_dict(global_state)
        local.append([manual_statistics(reference, ctx.train_x[idx]) for idx in clients])
        distances = [(s - running(global_state)).abs().sum().item() for s in local[-1]]
        for m, d in enumerate(distances):
            assert row[f"bn_local_distance_{m}"] == pytest.approx(d, rel=1e-10)
        assert row["bn_local_distance"] == pytest.approx(sum(distances) / 2, rel=1e-10)

    row = metric(ctx)
    check(row, first)
    assert math.isnan(row["bn_global_change"]) and math.isnan(row["bn_local_var"])
    assert_untouched(model, first)

    delta = torch.tensor([0.5, -1.0, 0.25, 2.0], dtype=torch.float64)
    for k, factor in enumerate((1.5, 0.5)):
        new = {key: value.clone() for key, value in state[0].items()}
        new["1.running_mean"] += delta * (k + 1)
        new["0.weight"] *= factor
        previous, state[0] = state[0], new
        row = metric(ctx)
        check(row, new)
        change = (running(new) - running(previous)).abs().sum().item()
        assert change == pytest.approx(delta.abs().sum().item() * (k + 1), rel=1e-12)
        assert row["bn_global_change"] == pytest.approx(change, rel=1e-12)
        for m in range(2):   # window 2: the last two evaluations only, population variance summed
            expected = ((local[-1][m] - local[-2][m]) ** 2 / 4).sum().item()
            assert row[f"bn_local_var_{m}"] == pytest.approx(expected, rel=1e-10)
        assert_untouched(model, new)


def test_drift_layers_option_selects_and_checks_layer_names():
    model = two_bn()
    ctx = context(model, [snapshot(model)], [torch.arange(0, 6)], batch=8)
    row = BNStatisticsDrift(layers=["4"])(ctx)
    s = manual_statistics(model, ctx.train_x[:6])[8:]
    assert row["bn_local_distance_0"] == pytest.approx((s - running(model.state_dict())[8:]).abs().sum().item(),
                                                       rel=1e-10)
    with pytest.raises(ConfigError, match=r"bn_statistics_drift.layers names \['2'\]"):
        BNStatisticsDrift(layers=["2"])(ctx)


def test_drift_draws_a_fixed_batch_per_client():
    model = two_bn()
    ctx = context(model, [snapshot(model)], [torch.arange(0, 30)], batch=4)
    a, b = BNStatisticsDrift()(ctx), BNStatisticsDrift()(ctx)
    assert a["bn_local_distance_0"] == b["bn_local_distance_0"]
    ctx.seed = 4
    assert BNStatisticsDrift()(ctx)["bn_local_distance_0"] != a["bn_local_distance_0"]


@pytest.mark.parametrize("entry", [{"name": "pooled_bn", "batch_size": 1},
                                   {"name": "global_train_loss", "max_samples": 0},
                                   {"name": "bn_statistics_drift", "window": 1},
                                   {"name": "bn_statistics_drift", "layers": "1"}])
def test_bad_options_are_config_errors(entry):
    with pytest.raises(ConfigError, match=entry["name"]):
        build_metric(entry)


def test_the_evaluator_gives_the_clients_training_indices_batch_size_and_seed(tmp_path):
    sim = build_simulation(["dataset=toy_gaussian", "model=mlp", "norm=bn", "num_clients=3", "batch_size=16", "seed=5"],
                           tmp_path, rounds=1)
    ctx = sim.evaluator.context()
    assert ctx.train_batch_size == 16 and ctx.seed == 5
    assert [idx.tolist() for idx in ctx.client_train] == [r.indices.tolist() for r in sim.store.records]


def test_a_run_writes_the_columns(tmp_path):
    cfg = compose_config(["dataset=toy_gaussian", "model=mlp", "norm=bn", "num_clients=3", "rounds=2",
                          "algo.local_steps=2", "eval_every=1",
                          "metrics=[global_train_loss,pooled_bn,{name:bn_statistics_drift,window:2}]"])
    assert run_experiment(cfg, tmp_path)["status"] == "completed"
    rows = pd.read_csv(tmp_path / "metrics.csv")
    columns = ["global_train_loss", "global_train_acc", "pooled_bn_test_acc", "pooled_bn_test_loss",
               "bn_local_distance", *(f"bn_local_distance_{m}" for m in range(3))]
    assert rows[columns].notna().all().all()
    for column in ("bn_global_change", "bn_local_var", *(f"bn_local_var_{m}" for m in range(3))):
        assert rows[column].isna().tolist() == [True, False], column   # from the second evaluation on
    assert 0.0 <= rows["pooled_bn_test_acc"].min() and rows["pooled_bn_test_acc"].max() <= 1.0


def metrics_of(experiment: str) -> tuple:
    cfg = compose_config([f"experiment={experiment}"])
    return cfg, [build_metric(e) for e in OmegaConf.to_container(cfg.metrics, resolve=True)]


def test_presets_ask_for_the_metrics_in_the_papers_settings():
    cfg, metrics = metrics_of("fixbn/fig2ab")
    assert [type(m) for m in metrics] == [BNStatisticsDrift] and metrics[0].window * cfg.eval_every == 200
    assert (cfg.dataset.name, cfg.model.name, cfg.norm.name, cfg.algo.name) == ("cifar10", "resnet20", "bn", "fedavg")
    assert (cfg.num_clients, cfg.clients_per_round, cfg.partition.classes_per_client, cfg.algo.local_steps,
            cfg.batch_size, cfg.algo.momentum) == (5, 5, 2, 1, 20, 0.0)
    cfg, metrics = metrics_of("fixbn/fig2c")
    assert [type(m) for m in metrics] == [GlobalTrainLoss] and metrics[0].max_samples is None
    cfg, metrics = metrics_of("fixbn/sec3_4")
    assert [type(m) for m in metrics] == [PooledBN]
    assert (cfg.dataset.name, cfg.model.name, cfg.partition.name, cfg.alpha, cfg.algo.local_steps, cfg.rounds,
            cfg.num_clients) == ("tinyimagenet", "resnet18", "dirichlet", 0.1, 100, 640, 10)


def test_fig2a_draws_two_columns_per_row(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    for seed, (change, distance) in enumerate(((0.5, 2.0), (1.5, 4.0))):
        make_run(runs, f"bn-seed{seed}", ["norm=bn", f"seed={seed}", "experiment=fixbn/fig2ab"], {"seed": seed},
                 {"status": "completed"}, [0.1, 0.2], rounds=[10, 20])
        (runs / f"bn-seed{seed}" / "metrics.csv").write_text(
            "round,test_acc,bn_global_change,bn_local_distance\n"
            f"10,0.1,nan,9.0\n20,0.2,{change},{distance}\n")
    draw(CATALOG["fixbn/fig2a"], tmp_path, CONF, runs=runs, out=out)
    md = (out / "fig2a.md").read_text().splitlines()
    label = CATALOG["fixbn/fig2a"].options["column_labels"]
    assert f"| BN: {label['bn_global_change']} | 2 | 2 | 20.0 | 1.0000 ± 0.7071 |" in md
    assert f"| BN: {label['bn_local_distance']} | 2 | 2 | 20.0 | 3.0000 ± 1.4142 |" in md


def test_sec3_4_table_puts_ours_beside_the_paper(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    make_run(runs, "bn-seed0", ["norm=bn", "seed=0", "experiment=fixbn/sec3_4"], {"seed": 0},
             {"status": "completed"}, [0.44])
    (runs / "bn-seed0" / "metrics.csv").write_text("round,test_acc,pooled_bn_test_acc\n640,0.44,0.45\n")
    draw(CATALOG["fixbn/sec3_4"], tmp_path, CONF, runs=runs, out=out)
    md = (out / "sec3_4.md").read_text().splitlines()
    assert "| FedAvg + BN | 1 | completed | 44.00 | 44.09 | -0.09 | 45.00 | 44.87 | +0.13 |" in md
