"""The round pipeline's seams, exercised from outside the package: an algorithm, an aggregation
rule and an update transform defined in this file alone (registered here, nothing else edited)
run through the engine, the algorithm on every backend without fallback."""
from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest
import torch

from conftest import compose_config
from fedbn_bench.algorithms.base import ALGORITHMS, AlgoConfig, Algorithm
from fedbn_bench.core.aggregation import AGGREGATORS, Aggregator
from fedbn_bench.core.transforms import TRANSFORMS, UpdateTransform
from fedbn_bench.engine.select import select_engine
from fedbn_bench.runner import build_federation, run_experiment
from test_engine_equivalence import BASE, assert_equivalent, simulate

MU = 0.5


@dataclass
class ToyProxConfig(AlgoConfig):
    name: str = "toy_prox"
    mu: float = MU


class ToyProx(Algorithm):
    """FedAvg whose gradient hook adds ``mu * (w - w_global)`` (FedProx's proximal gradient)."""

    config_class = ToyProxConfig

    def start(self, params, client_state):
        return {**super().start(params, client_state), "anchor": {k: p.clone() for k, p in params.items()}}

    def gradient_hook(self, grads, params, local):
        return {k: g + self.cfg.mu * (params[k] - local["anchor"][k]) for k, g in grads.items()}


class MedianRule(Aggregator):
    """Coordinate-wise median (ignores the weights)."""

    def __call__(self, values, weights):
        return values.median(0).values if values.is_floating_point() else values[0]


class NegateFirst(UpdateTransform):
    """Replaces the first client's weights by their negation (a sign-flipping client)."""

    seen: list = []

    def __call__(self, updates, info):
        NegateFirst.seen.append(info.clients)
        first = updates[0]
        return [first.with_weights({k: -v for k, v in first.weights.items()}), *updates[1:]]


@pytest.fixture
def toy_prox():
    ALGORITHMS.register("toy_prox")(ToyProx)
    yield
    ALGORITHMS.unregister("toy_prox")


def toy_prox_simulation(simulation_class):
    """The equivalence harness builds algorithms from the config; swap in ToyProx after building."""

    class WithToyProx(simulation_class):
        def __init__(self, fed, *args, **kwargs):
            fed.algo = ToyProx(ToyProxConfig(lr=fed.algo.cfg.lr, momentum=fed.algo.cfg.momentum,
                                             weight_decay=fed.algo.cfg.weight_decay))
            super().__init__(fed, *args, **kwargs)

    return WithToyProx


@pytest.mark.parametrize("engine", ["vmap", "packed"])
def test_an_algorithm_defined_in_a_test_runs_stacked_without_fallback(engine, tmp_path, toy_prox, caplog):
    from fedbn_bench.engine.simulation import Simulation

    cfg = compose_config(BASE)
    fed, _ = build_federation(cfg, torch.device("cpu"))
    fed.algo = ToyProx(ToyProxConfig())
    with caplog.at_level(logging.WARNING, logger="fedbn_bench"):
        assert select_engine(engine, fed, cfg.batch_size, cfg.clients_per_round, torch.device("cpu")) == engine
    assert not caplog.records
    prox = assert_equivalent(["norm=bn"], tmp_path, engine=engine, simulation=toy_prox_simulation(Simulation))
    plain, _ = simulate("loop", ["norm=bn"], tmp_path / "plain")
    moved = max((prox.store.global_state[k] - plain.store.global_state[k]).abs().max().item()
                for k in plain.store.global_state if plain.store.global_state[k].is_floating_point())
    assert moved > 1e-4, "the proximal term changes training"


def test_the_proximal_hook_pulls_towards_the_start(tmp_path):
    """A hook that replaces the gradient by the pull towards the start keeps every client at the
    global weights: the rounds change nothing (up to the float32 client weights' rounding)."""
    from fedbn_bench.engine.simulation import Simulation

    class Stiff(ToyProx):
        def gradient_hook(self, grads, params, local):
            return {k: 0 * g + (params[k] - local["anchor"][k]) for k, g in grads.items()}

    class WithStiff(Simulation):
        def __init__(self, fed, *args, **kwargs):
            fed.algo = Stiff(ToyProxConfig(lr=0.05, momentum=0.0))
            super().__init__(fed, *args, **kwargs)

    sim, _ = simulate("packed", ["norm=gn"], tmp_path, simulation=WithStiff)
    torch.manual_seed(compose_config(BASE).seed)
    start = build_federation(compose_config([*BASE, "norm=gn"]), torch.device("cpu"))[0].model.state_dict()
    for k, v in sim.store.global_state.items():
        torch.testing.assert_close(v, start[k].to(v.dtype), rtol=1e-6, atol=1e-7)


def test_an_aggregator_and_a_transform_defined_in_a_test_run_through_the_engine(tmp_path, monkeypatch):
    AGGREGATORS.register("toy_median")(MedianRule)
    TRANSFORMS.register("negate_first")(NegateFirst)
    calls = []
    original = MedianRule.__call__

    def counting(self, values, weights):
        calls.append(values.shape)
        return original(self, values, weights)

    monkeypatch.setattr(MedianRule, "__call__", counting)
    try:
        common = ["rounds=2", "num_clients=4", "eval_every=1", "aggregator.name=toy_median"]
        summary = run_experiment(compose_config([*common, "+transforms=[{name: negate_first}]"]), tmp_path / "a")
        assert summary["status"] == "completed"
        assert NegateFirst.seen == [[0, 1, 2, 3], [0, 1, 2, 3]]
        bn_layers = 2  # fbn_cnn's BatchNorm layers: the median also aggregates their statistics
        assert len(calls) > 2 * bn_layers and all(shape[0] == 4 for shape in calls)
    finally:
        AGGREGATORS.unregister("toy_median")
        TRANSFORMS.unregister("negate_first")


def test_groupnorm_trains_with_batch_size_one(tmp_path):
    summary = run_experiment(compose_config(["norm=gn", "batch_size=1", "rounds=1", "num_clients=2",
                                             "algo.local_steps=3"]), tmp_path)
    assert summary["status"] == "completed"
