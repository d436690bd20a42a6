"""Server optimizers on the pseudo-gradient (``algorithms/server_opt.py``): FedAvgM's reduction to
FedAvg, one server step of FedAdam / FedYogi / FedAdagrad (and FedAvgM) against Reddi et al.'s
Alg. 2 on hand-built tensors, the state's checkpoint round trip, bad options, and every algorithm
with every norm family for 2 rounds (server state only on uploaded, non-local parameters)."""
from __future__ import annotations

import math

import pytest
import torch
from omegaconf import OmegaConf

from conftest import build_simulation, compose_config
from fedbn_bench.algorithms import ALGORITHMS, build_algorithm
from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.updates import ClientUpdate
from fedbn_bench.engine import checkpoint as ckpt
from fedbn_bench.errors import ConfigError
from fedbn_bench.runner import build_federation, run_experiment

SERVER_OPTIMIZERS = ["fedavgm", "fedadam", "fedyogi", "fedadagrad"]


def algo(name: str, **kw):
    return build_algorithm(OmegaConf.structured(ALGORITHMS.get(name).config_class(**kw)))


def global_states(overrides: list[str], tmp_path, rounds: int = 2) -> dict[str, torch.Tensor]:
    """The global state after ``rounds`` rounds on ``engine=loop`` in float64."""
    sim = build_simulation(["model=simple_cnn", "num_clients=6", "clients_per_round=3", "batch_size=32", *overrides],
                           tmp_path, rounds)
    for r in range(rounds):
        sim.run_round(r)
    return sim.store.global_state


def test_fedavgm_without_momentum_and_unit_server_lr_is_fedavg(tmp_path):
    """β = 0, η = 1: ``w + (avg − w)``, FedAvg's average up to that one rounding (float64)."""
    fedavg = global_states(["algo=fedavg"], tmp_path / "fedavg")
    fedavgm = global_states(["algo=fedavgm", "algo.server_momentum=0", "algo.server_lr=1"], tmp_path / "m")
    momentum = global_states(["algo=fedavgm"], tmp_path / "momentum")
    assert fedavg.keys() == fedavgm.keys()
    for k in fedavg:
        torch.testing.assert_close(fedavgm[k], fedavg[k], rtol=1e-14, atol=1e-15, msg=k)
    assert any(not torch.allclose(momentum[k], fedavg[k]) for k in fedavg if fedavg[k].is_floating_point())


W = torch.tensor([0.5, -1.0, 2.0, 0.0], dtype=torch.float64)
CLIENTS = [torch.tensor([0.7, -1.2, 1.0, 0.3], dtype=torch.float64),
           torch.tensor([0.1, -0.2, 2.5, -0.9], dtype=torch.float64)]
WEIGHTS = torch.tensor([0.25, 0.75])
COUNT = torch.tensor(7)


def server_round(alg, w: torch.Tensor, clients: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    """One server update from hand-built uploads; ``count`` is an integer entry."""
    updates = [ClientUpdate(i, {"w": c, "count": COUNT + i}, {}, {}, 10, torch.zeros(()))
               for i, c in enumerate(clients)]
    return alg.server_update({"w": w, "count": COUNT}, updates, WEIGHTS, Aggregator(), 0.1)


def pseudo_gradient(w: torch.Tensor, clients: list[torch.Tensor]) -> torch.Tensor:
    return 0.25 * clients[0] + 0.75 * clients[1] - w


def second_moment(name: str, v: torch.Tensor, d2: torch.Tensor, beta2: float) -> torch.Tensor:
    """Reddi et al. 2021, Alg. 2: FedAdagrad, FedYogi, FedAdam."""
    if name == "fedadagrad":
        return v + d2
    if name == "fedyogi":
        return v - (1 - beta2) * d2 * torch.sign(v - d2)
    return beta2 * v + (1 - beta2) * d2


@pytest.mark.parametrize("name", ["fedadam", "fedyogi", "fedadagrad"])
def test_adaptive_server_steps_follow_reddi_alg2(name):
    """Two rounds, so the carried m and v enter the second; m₋₁ = 0, v₋₁ = τ²."""
    lr, beta1, beta2, tau = 0.3, 0.8, 0.95, 0.05
    kw = {} if name == "fedadagrad" else {"beta2": beta2}
    alg = algo(name, server_lr=lr, beta1=beta1, tau=tau, **kw)
    m, v, w = torch.zeros(4, dtype=torch.float64), torch.full((4,), tau ** 2, dtype=torch.float64), W
    second = [c + 0.4 for c in CLIENTS]
    for clients in (CLIENTS, second):
        d = pseudo_gradient(w, clients)
        m = beta1 * m + (1 - beta1) * d
        v = second_moment(name, v, d * d, beta2)
        expected = w + lr * m / (v.sqrt() + tau)
        new = server_round(alg, w, clients)
        torch.testing.assert_close(new["w"], expected, rtol=1e-13, atol=1e-15)
        torch.testing.assert_close(alg.first_moment["w"], m, rtol=1e-13, atol=1e-15)
        torch.testing.assert_close(alg.second_moment["w"], v, rtol=1e-13, atol=1e-15)
        assert torch.equal(new["count"], Aggregator()(torch.stack([COUNT, COUNT + 1]), WEIGHTS))  # FedAvg's
        assert set(alg.first_moment) == set(alg.second_moment) == {"w"}
        w = new["w"]


def test_yogi_moves_v_by_sign_of_v_minus_delta_squared():
    """A hand-computed Yogi value: v = 1, Δ² = 4 (v < Δ²) grows by (1 − β2)·4; v = 9 shrinks."""
    alg = algo("fedyogi", beta2=0.5, v_init=1.0)
    assert torch.equal(alg.second_moment_step(torch.tensor([1.0, 9.0]), torch.tensor([4.0, 4.0])),
                       torch.tensor([3.0, 7.0]))


def test_fedavgm_step_is_hsu_server_momentum():
    lr, beta = 0.5, 0.9
    alg = algo("fedavgm", server_lr=lr, server_momentum=beta)
    v, w = torch.zeros(4, dtype=torch.float64), W
    for clients in (CLIENTS, [c * 2 for c in CLIENTS]):
        v = beta * v + pseudo_gradient(w, clients)
        new = server_round(alg, w, clients)
        torch.testing.assert_close(new["w"], w + lr * v, rtol=1e-13, atol=1e-15)
        w = new["w"]


@pytest.mark.parametrize("name", SERVER_OPTIMIZERS)
def test_server_state_round_trips_through_a_checkpoint(name, tmp_path):
    alg = algo(name)
    server_round(alg, W, CLIENTS)
    ckpt.save_checkpoint(tmp_path, {"algo_state": ckpt.plain_attributes(alg)})
    fresh = algo(name)
    ckpt.restore_attributes(fresh, ckpt.load_checkpoint(tmp_path)["algo_state"])
    states = ["velocity"] if name == "fedavgm" else ["first_moment", "second_moment"]
    for attr in states:
        assert getattr(fresh, attr).keys() == getattr(alg, attr).keys() == {"w"}
        assert torch.equal(getattr(fresh, attr)["w"], getattr(alg, attr)["w"])
    assert torch.equal(server_round(fresh, W, CLIENTS)["w"], server_round(alg, W, CLIENTS)["w"])


@pytest.mark.parametrize(("name", "kw", "key"), [
    ("fedavgm", {"server_momentum": 1.0}, "algo.server_momentum"),
    ("fedavgm", {"server_lr": 0.0}, "algo.server_lr"),
    ("fedadam", {"beta1": 1.0}, "algo.beta1"),
    ("fedyogi", {"beta2": -0.1}, "algo.beta2"),
    ("fedadagrad", {"tau": 0.0}, "algo.tau"),
    ("fedadam", {"v_init": -1.0}, "algo.v_init"),
])
def test_bad_options_name_the_key(name, kw, key):
    with pytest.raises(ConfigError, match=key):
        algo(name, **kw)


@pytest.mark.parametrize("norm", ["bn", "fedbn", "fbn", "hbn", "gn"])
@pytest.mark.parametrize("name", SERVER_OPTIMIZERS)
def test_every_server_optimizer_runs_with_every_norm(name, norm, tmp_path):
    """Two rounds to completion; the server state covers exactly the uploaded parameters: no key a
    norm keeps local, no running statistics."""
    cfg = compose_config(["model=simple_cnn", "num_clients=5", "clients_per_round=3", "batch_size=32",
                          "rounds=2", "checkpoint_every=2", f"norm={norm}", f"algo={name}"])
    summary = run_experiment(cfg, tmp_path)
    assert summary["status"] == "completed" and summary["rounds_completed"] == 2
    assert math.isfinite(summary["final_test_acc"])
    state = torch.load(tmp_path / ckpt.FILENAME, weights_only=True)
    fed, _ = build_federation(cfg, torch.device("cpu"))
    local = set(fed.norm.local_keys(fed.model))
    shared = {k for k, _ in fed.model.named_parameters() if k not in local}
    algo_state = state["algo_state"]
    for attr in ["velocity"] if name == "fedavgm" else ["first_moment", "second_moment"]:
        assert set(algo_state[attr]) == shared, attr
