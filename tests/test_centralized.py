"""The centralized reference (algo=centralized) draws the union of one batch per client (FBN
Remark 4.1): under gamma=0 every union batch holds exactly ``batch_size`` samples of each client,
the same samples the DSGD clients draw in that round; ``union_draw=uniform`` draws from the pool."""
from __future__ import annotations

import pytest
import torch

from conftest import compose_config
from fedbn_bench.engine.backends import loop
from fedbn_bench.engine.sampling import client_round_batches
from fedbn_bench.engine.settings import RunSettings
from fedbn_bench.engine.simulation import Simulation
from fedbn_bench.errors import ConfigError
from fedbn_bench.partition import make_partition, partition_params
from fedbn_bench.records.loggers import NullLogger
from fedbn_bench.records.run_records import RunRecorder
from fedbn_bench.runner import build_federation, load_data

B, ROUNDS = 4, 3
TOY = ["dataset=toy_gaussian", "model=mlp", "partition=gamma", "gamma=0", "num_clients=10", f"batch_size={B}",
       "algo=centralized", "norm=bn", "lr=0.1"]
"""toy_gaussian holds 30 training points per class, so under gamma=0 client k holds class k only."""


def trained_labels(overrides: list[str], tmp_path, monkeypatch) -> list[torch.Tensor]:
    """The label batches the loop backend trains the pooled client on, round by round."""
    seen: list[torch.Tensor] = []

    def spy(*args, **kwargs):
        x, y = client_round_batches(*args, **kwargs)
        seen.extend(y)
        return x, y

    monkeypatch.setattr(loop, "client_round_batches", spy)
    cfg = compose_config([*TOY, *overrides])
    fed, _ = build_federation(cfg, torch.device("cpu"))
    settings = RunSettings(rounds=ROUNDS, clients_per_round=cfg.clients_per_round, batch_size=cfg.batch_size,
                           lr=cfg.algo.lr, schedule=cfg.algo.schedule, seed=cfg.seed, eval_every=ROUNDS,
                           progress=False)
    sim = Simulation(fed, settings, RunRecorder(tmp_path), NullLogger(), engine="loop")
    for r in range(ROUNDS):
        sim.run_round(r)
    return seen


def test_union_batch_holds_one_batch_of_each_client(tmp_path, monkeypatch):
    batches = trained_labels([], tmp_path, monkeypatch)
    assert len(batches) == ROUNDS
    for y in batches:
        assert torch.equal(torch.bincount(y, minlength=10), torch.full((10,), B))


def test_uniform_draw_is_not_stratified(tmp_path, monkeypatch):
    batches = trained_labels(["algo.union_draw=uniform"], tmp_path, monkeypatch)
    assert len(batches) == ROUNDS and all(len(y) == 10 * B for y in batches)
    assert any(not torch.equal(torch.bincount(y, minlength=10), torch.full((10,), B)) for y in batches)


def test_union_is_what_the_dsgd_clients_draw():
    """Round r's union batch is the concatenation of the batches DSGD's clients draw in round r
    (same generator per client), checked by index on the digits' gamma=0 partition."""
    cfg = compose_config(["partition=gamma", "gamma=0", "num_clients=10", f"batch_size={B}", "algo=centralized"])
    fed, _ = build_federation(cfg, torch.device("cpu"))
    (pooled,) = fed.clients
    data = load_data(cfg)
    parts = make_partition("gamma", data.train.y, 10, cfg.seed, domains=data.train.domain,
                           **partition_params(cfg.partition))
    train = fed.data.train
    idx = torch.arange(len(train.y))
    for r in range(ROUNDS):
        union, _ = client_round_batches(idx, idx, pooled.indices, 10 * B, 1, (cfg.seed, r, 0), False,
                                        strata=pooled.strata)
        own = [client_round_batches(idx, idx, part, B, 1, (cfg.seed, r, k), False)[0] for k, part in enumerate(parts)]
        assert torch.equal(union, torch.cat(own, dim=1))


def test_bad_union_draw_and_partial_participation_fail_with_one_error():
    with pytest.raises(ConfigError, match="union_draw='random' is unknown"):
        build_federation(compose_config([*TOY, "algo.union_draw=random"]), torch.device("cpu"))
    with pytest.raises(ConfigError, match="clients_per_round = num_clients"):
        build_federation(compose_config([*TOY, "clients_per_round=5"]), torch.device("cpu"))
    build_federation(compose_config([*TOY, "clients_per_round=5", "algo.union_draw=uniform"]), torch.device("cpu"))
