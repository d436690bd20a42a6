"""FedBN (fedbn_local_batch_normalization.txt App. C, Alg. 1): through real simulations, every
BatchNorm parameter and statistic stays with its client, every other weight is shared, and each
client is evaluated with its own BatchNorm on its own test split.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from conftest import compose_config
from fedbn_bench import runner
from fedbn_bench.engine.simulation import Simulation
from fedbn_bench.errors import ConfigError
from fedbn_bench.metrics import evaluate
from fedbn_bench.norms import build_norm
from fedbn_bench.runner import run_experiment

NUM_CLIENTS = 5


class Spy(Simulation):
    """The engine, recording each client's BatchNorm state when its local training ends (in the
    model the loop backend trained) and the updates of every server update."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.trained: dict[int, dict[str, torch.Tensor]] = {}
        self.updates: list[tuple[dict, list, torch.Tensor, dict]] = []
        self.statistics: list[tuple[list, dict]] = []
        update, aggregate = self.fed.algo.server_update, self.fed.norm.aggregate_statistics
        train_client = self.backend.train_client

        def spy_update(global_state, updates, weights, aggregator, lr):
            shared = {k: v.clone() for k, v in global_state.items()}  # what the server held before
            out = update(global_state, updates, weights, aggregator, lr)
            self.updates.append((shared, updates, weights, out))
            return out

        def spy_aggregate(stats, weights, aggregator, global_state):
            out = aggregate(stats, weights, aggregator, global_state)
            self.statistics.append((stats, out))
            return out

        def spy_train_client(job, round_idx, lr):
            out = train_client(job, round_idx, lr)
            state = self.fed.model.state_dict()
            self.trained[job.client] = {k: state[k].detach().clone() for k in bn_keys(self.fed.model)}
            return out

        self.fed.algo.server_update = spy_update
        self.fed.norm.aggregate_statistics = spy_aggregate
        self.backend.train_client = spy_train_client
        Spy.last = self


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """3 rounds, 3 of 5 feature-shifted clients (one per domain) per round."""
    mp = pytest.MonkeyPatch()
    mp.setattr(runner, "Simulation", Spy)
    cfg = compose_config(["engine=loop", "norm=fedbn", "model=simple_cnn", "partition=domains",
                          f"num_clients={NUM_CLIENTS}", "clients_per_round=3", "rounds=3", "algo.local_steps=3",
                          "eval_every=1"])
    summary = run_experiment(cfg, tmp_path_factory.mktemp("fedbn"))
    mp.undo()
    assert summary["status"] == "completed"
    assert Spy.last.engine == "loop"  # the spy wraps the loop backend's train_client
    Spy.last.summary = summary
    return Spy.last


def bn_keys(model: nn.Module) -> set[str]:
    return {f"{n}.{k}" for n, m in model.named_modules() if isinstance(m, nn.BatchNorm2d) for k in m.state_dict()}


def test_local_keys_are_every_batchnorm_entry(sim):
    keys = bn_keys(sim.fed.model)
    assert set(sim.store.local_keys) == keys
    assert any(k.endswith("running_mean") for k in keys) and any(k.endswith(".weight") for k in keys)
    # no statistics are uploaded or aggregated: the BatchNorm statistics never leave their client
    assert sim.fed.norm.client_statistics(sim.fed.model, 10) == {}
    assert sim.statistics and all(stats == [{}] * len(stats) and out == {} for stats, out in sim.statistics)


def test_each_client_keeps_what_its_own_training_produced(sim):
    trained = set(sim.trained)
    assert len(trained) >= 3  # several clients trained over the 3 rounds
    keys = sorted(bn_keys(sim.fed.model))
    for client in range(NUM_CLIENTS):
        sim.store.load_client(sim.fed.model, client)
        state = sim.fed.model.state_dict()
        for key in keys:
            produced = sim.trained[client][key] if client in trained else sim.store.client_local[client][key]
            assert torch.equal(state[key], produced), (client, key)
    means = [torch.cat([sim.trained[c][k].flatten().float() for k in keys]) for c in trained]
    assert all(not torch.equal(means[i], means[j]) for i in range(len(means)) for j in range(i + 1, len(means)))
    average = torch.stack(means).mean(0)
    assert all(not torch.allclose(m, average) for m in means)  # never replaced by an average


def test_every_other_weight_is_the_shared_average(sim):
    before, updates, weights, out = sim.updates[-1]
    store, local = sim.store, set(sim.store.local_keys)
    uploaded = {k for u in updates for k in (*u.weights, *(k for e in u.extras.values() for k in e), *u.statistics)}
    assert not (set(out) | uploaded) & local
    assert set(out) == set(before) - local  # every other weight is updated
    for key, value in out.items():
        expected = sum(w * u.weights[key] for w, u in zip(weights, updates))
        torch.testing.assert_close(value, expected)
        torch.testing.assert_close(store.global_state[key], expected)
    shared = [k for k in store.global_state if k not in local]
    for client in range(NUM_CLIENTS):
        store.load_client(sim.fed.model, client)
        state = sim.fed.model.state_dict()
        assert all(torch.equal(state[k], store.global_state[k]) for k in shared)


def test_evaluation_is_per_client_with_its_own_bn_on_its_own_test_split(sim):
    fed, test = sim.fed, sim.fed.data.test
    client_test = [r.test_indices for r in fed.clients]
    assert sim.personalized and all(idx is not None for idx in client_test)
    own, borrowed = [], []
    for client in range(NUM_CLIENTS):
        idx = client_test[client]
        assert torch.all(test.domain[idx] == fed.data.train.domain[fed.clients[client].indices[0]])
        sim.store.load_client(fed.model, client)
        own.append(evaluate(fed.model, test.x[idx], test.y[idx])[0])
        fed.model.load_state_dict(sim.store.global_state)
        borrowed.append(evaluate(fed.model, test.x[idx], test.y[idx])[0])
    assert sim.summary["final_test_acc"] == pytest.approx(sum(own) / NUM_CLIENTS)
    assert own != borrowed  # the clients' own BN state matters


def test_fedbn_builds_plain_batchnorm_layers():
    norm = build_norm(compose_config(["norm=fedbn"]).norm)
    assert isinstance(norm.norm_layer(8, 2), nn.BatchNorm2d) and isinstance(norm.norm_layer(8, 1), nn.BatchNorm1d)


def run_spy(tmp_path, overrides: list[str]) -> Spy:
    """A short FedBN run through ``Spy`` (see the ``sim`` fixture)."""
    mp = pytest.MonkeyPatch()
    mp.setattr(runner, "Simulation", Spy)
    try:
        assert run_experiment(compose_config(["engine=loop", *overrides]), tmp_path)["status"] == "completed"
    finally:
        mp.undo()
    return Spy.last


@pytest.mark.parametrize("weighting", ["uniform", "size"])
def test_shared_weights_are_averaged_as_configured_with_unequal_clients(tmp_path, weighting):
    """Alg. 1 line 8 averages the shared weights with 1/K (``uniform``, the default); ``size``
    weights them by training-data size (FedAvg). Dirichlet(0.1) gives clearly unequal clients."""
    overrides = ["norm=fedbn", "model=simple_cnn", "partition=dirichlet", "alpha=0.1", "num_clients=4",
                 "rounds=1", "algo.local_steps=2", "batch_size=8"]
    sim = run_spy(tmp_path, overrides if weighting == "uniform" else [*overrides, f"norm.weighting={weighting}"])
    _, updates, _, out = sim.updates[-1]
    sizes = torch.tensor([sim.store.records[u.client].size for u in updates], dtype=torch.float64)
    assert len(updates) == 4 and sizes.max() > 2 * sizes.min()
    uniform = torch.full_like(sizes, 1 / len(sizes))
    expected, other = (uniform, sizes / sizes.sum()) if weighting == "uniform" else (sizes / sizes.sum(), uniform)
    for key, value in out.items():
        stacked = torch.stack([u.weights[key].double() for u in updates])
        mean = torch.tensordot(expected, stacked, dims=1)
        torch.testing.assert_close(value.double(), mean, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(sim.store.global_state[key].double(), mean, rtol=1e-5, atol=1e-6)
    key = next(k for k in out if k.endswith("weight"))
    stacked = torch.stack([u.weights[key].double() for u in updates])
    assert not torch.allclose(out[key].double(), torch.tensordot(other, stacked, dims=1))  # the two rules differ


def test_unknown_weighting_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="norm.weighting='mean' is unknown; allowed: uniform, size"):
        run_experiment(compose_config(["norm=fedbn", "debug=default", "norm.weighting=mean"]), tmp_path)
