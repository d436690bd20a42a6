"""SCAFFOLD (Karimireddy et al. 2020, Alg. 1, option II): its reduction to FedAvg in a first round,
its control-variate updates on hand-built tensors, local keys kept out of c / c_i / Δc, bad options,
and 2-round runs with every norm it composes with."""
from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from conftest import build_simulation, compose_config
from fedbn_bench.algorithms.scaffold import Scaffold, ScaffoldConfig
from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.updates import ClientUpdate
from fedbn_bench.engine.checkpoint import plain_attributes
from fedbn_bench.engine.simulation import Simulation
from fedbn_bench.errors import ConfigError
from fedbn_bench.runner import run_experiment

BASE = ["model=simple_cnn", "num_clients=6", "clients_per_round=3", "batch_size=32", "alpha=0.3", "lr=0.05"]
PLAIN_SGD = ["algo.momentum=0", "algo.weight_decay=0", "algo.clip_grad_norm=null"]


def simulation(overrides: list[str], tmp_path, rounds: int = 2) -> Simulation:
    """A float64 loop simulation of ``overrides`` (nothing run yet)."""
    return build_simulation([*BASE, *overrides], tmp_path, rounds)


def scaffold(**options) -> Scaffold:
    return Scaffold(OmegaConf.structured(ScaffoldConfig(**options)))


def test_first_round_with_zero_control_variates_equals_fedavg(tmp_path):
    """c = c_i = 0, η_g = 1, uniform weights: the new weights are FedAvg's (float64 rounding:
    x + mean(y − x) against mean(y)). Four clients, so that the float32 weights 1/4 sum to one."""
    fedavg = simulation(["algo=fedavg", "clients_per_round=4", *PLAIN_SGD], tmp_path / "fedavg")
    fedavg.fed.algo.client_weights = Scaffold.client_weights.__get__(scaffold())
    ours = simulation(["algo=scaffold", "clients_per_round=4"], tmp_path / "scaffold")
    assert not ours.fed.algo.c
    fedavg.run_round(0)
    ours.run_round(0)
    for key, value in fedavg.store.global_state.items():
        torch.testing.assert_close(ours.store.global_state[key], value, rtol=0, atol=1e-13, msg=key)
    assert ours.fed.algo.c  # and the round did define c


def test_one_round_of_control_variates_follows_option_ii():
    """Two clients, K = 2 hand-made gradients: the local steps (Alg. 1 line 10), c_i⁺ (option II),
    Δy, Δc (line 13) and the server's x and c (lines 16-17), for one client and for a stack."""
    eta, eta_g, n_total = 0.1, 0.5, 4
    algo = scaffold(lr=eta, server_lr=eta_g, num_clients=n_total, momentum=0.0, weight_decay=0.0)
    c = torch.tensor([0.2, -0.4], dtype=torch.float64)
    algo.c = {"w": c.clone()}
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    c_i = [torch.tensor([0.1, 0.3], dtype=torch.float64), torch.tensor([-0.5, 0.0], dtype=torch.float64)]
    grads = [[torch.tensor([1.0, -1.0], dtype=torch.float64), torch.tensor([0.5, 2.0], dtype=torch.float64)],
             [torch.tensor([-2.0, 0.25], dtype=torch.float64), torch.tensor([3.0, 1.0], dtype=torch.float64)]]

    expected = []
    for ci, gs in zip(c_i, grads):
        y = x.clone()
        for g in gs:
            y = y - eta * (g - ci + c)
        ci_new = ci - c + (x - y) / (len(gs) * eta)
        expected.append((y - x, ci_new - ci, ci_new))

    updates = []
    for i, (ci, gs) in enumerate(zip(c_i, grads)):  # one client at a time (engine=loop)
        params = {"w": x.clone()}
        local = algo.start(params, {"control": {"w": ci}})
        for g in gs:
            algo.step(params, algo.gradient_hook({"w": g}, params, local), local, eta)
        upload, extras, state = algo.finish(params, local)
        dy, dc, ci_new = expected[i]
        torch.testing.assert_close(upload["w"], dy)
        torch.testing.assert_close(extras["control"]["w"], dc)
        torch.testing.assert_close(state["control"]["w"], ci_new)
        updates.append(ClientUpdate(i, upload, {}, extras, 10, torch.zeros(())))

    params = {"w": torch.stack([x, x])}  # the same clients as one stack (vmap, packed)
    local = algo.start({"w": x.clone()}, {"control": {"w": c_i[0]}})
    other = algo.start({"w": x.clone()}, {"control": {"w": c_i[1]}})
    local = {k: ({kk: torch.stack([v[kk], other[k][kk]]) for kk in v} if isinstance(v, dict)
                 else torch.stack([v, other[k]])) for k, v in local.items()}
    for s in range(2):
        g = torch.stack([grads[0][s], grads[1][s]])
        algo.step(params, algo.gradient_hook({"w": g}, params, local), local, eta)
    upload, extras, state = algo.finish(params, local)
    torch.testing.assert_close(upload["w"], torch.stack([e[0] for e in expected]))
    torch.testing.assert_close(extras["control"]["w"], torch.stack([e[1] for e in expected]))
    torch.testing.assert_close(state["control"]["w"], torch.stack([e[2] for e in expected]))

    weights = algo.client_weights(torch.tensor([10, 30]))
    torch.testing.assert_close(weights, torch.full((2,), 0.5))
    new = algo.server_update({"w": x.clone()}, updates, weights, Aggregator(), eta)
    mean_dy = (expected[0][0] + expected[1][0]) / 2
    mean_dc = (expected[0][1] + expected[1][1]) / 2
    torch.testing.assert_close(new["w"], x + eta_g * mean_dy)
    torch.testing.assert_close(algo.c["w"], c + (2 / n_total) * mean_dc)
    assert "c" in plain_attributes(algo)  # checkpointed with the algorithm object


def test_size_weighting_gives_data_size_weights():
    weights = scaffold(weighting="size").client_weights(torch.tensor([10, 30]))
    torch.testing.assert_close(weights, torch.tensor([0.25, 0.75]))


def local_keys_seen(tmp_path, rounds: int) -> tuple[set[str], set[str], set[str], set[str]]:
    """``(local keys, keys of c, of every Δc uploaded, of every stored c_i)`` after ``rounds``
    rounds of norm=fedbn with full participation."""
    sim = simulation(["algo=scaffold", "norm=fedbn", "clients_per_round=6"], tmp_path, rounds)
    algo = sim.fed.algo
    uploaded: set[str] = set()
    server_update = algo.server_update

    def spy(global_state, updates, weights, aggregator, lr):
        for u in updates:
            uploaded.update(u.extras["control"])
        return server_update(global_state, updates, weights, aggregator, lr)

    algo.server_update = spy
    for r in range(rounds):
        sim.run_round(r)
    stored = set().union(*(s["control"] for s in sim.store.client_algo_state))
    assert sim.store.local_keys and algo.c and uploaded and stored
    return set(sim.store.local_keys), set(algo.c), uploaded, stored


def test_local_keys_never_in_c_or_uploaded_control(tmp_path):
    local, c, uploaded, stored = local_keys_seen(tmp_path, rounds=2)
    assert not local & c and not local & uploaded
    assert not local & stored  # every client trained again after c's keys were known
    assert c == uploaded == stored


def test_local_keys_never_in_c_i_after_the_first_round(tmp_path):
    local, _, _, stored = local_keys_seen(tmp_path, rounds=1)
    assert not local & stored


@pytest.mark.parametrize(("option", "message"), [
    ("algo.weighting=mean", "algo.weighting='mean' is unknown"),
    ("algo.server_lr=0", "algo.server_lr=0"),
    ("algo.num_clients=0", "algo.num_clients=0"),
])
def test_bad_options_raise_one_config_error(option, message):
    cfg = compose_config(["algo=scaffold", option])
    with pytest.raises(ConfigError, match=message):
        Scaffold(cfg.algo)


@pytest.mark.parametrize("norm", ["bn", "fedbn", "fbn", "hbn", "gn"])
def test_runs_two_rounds_with_every_norm(norm, tmp_path):
    cfg = compose_config(["algo=scaffold", f"norm={norm}", "rounds=2", "eval_every=1", "num_clients=4",
                          "clients_per_round=2", "model=simple_cnn", "batch_size=32"])
    assert run_experiment(cfg, tmp_path)["status"] == "completed"
