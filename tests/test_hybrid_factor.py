"""``hybrid_factor`` (HBN Eq. 9's w = sigmoid(α), per layer): after an HBN run it is, layer by layer, the mean over
clients of the channel mean of sigmoid(α) in each client's model, with its sd over clients, the mean over clients of
its sd over channels and its largest distance from 0.5 over clients and channels; a client never
sampled still holds α = 0 (w = 0.5); a model without a learned factor is a ConfigError."""
from __future__ import annotations

import statistics

import pytest
import torch

from conftest import build_simulation
from fedbn_bench.errors import ConfigError
from fedbn_bench.metrics import METRICS

BASE = ["model=simple_cnn", "num_clients=3", "clients_per_round=2", "algo.local_steps=2", "batch_size=32",
        "partition=iid", "norm=hbn", "norm.variant=paper"]


def test_the_factor_of_each_layer_over_the_clients(tmp_path):
    sim = build_simulation(BASE, tmp_path, rounds=1)
    sim.run()
    row = METRICS.get("hybrid_factor")()(sim.evaluator.context())
    layers = [k.removesuffix(".hybrid_factor") for k in sim.fed.model.state_dict() if k.endswith(".hybrid_factor")]
    assert layers and set(row) == {f"hbn_w_{kind}{n}" for n in layers for kind in ("", "sd_", "ch_sd_", "ch_move_")}
    for layer in layers:
        channels = []
        for client in range(3):
            sim.store.load_client(sim.fed.model, client)
            channels.append(torch.sigmoid(sim.fed.model.state_dict()[f"{layer}.hybrid_factor"].double()).flatten())
        w = [c.mean().item() for c in channels]
        assert row[f"hbn_w_{layer}"] == pytest.approx(sum(w) / 3, rel=1e-12)
        assert row[f"hbn_w_sd_{layer}"] == pytest.approx(statistics.stdev(w), rel=1e-9)
        assert 0.5 in w and any(v != 0.5 for v in w)   # 2 of 3 clients trained; the third holds α = 0
        spreads = [statistics.stdev(c.tolist()) for c in channels]
        assert row[f"hbn_w_ch_sd_{layer}"] == pytest.approx(sum(spreads) / 3, rel=1e-9)
        assert 0.0 in spreads and row[f"hbn_w_ch_sd_{layer}"] > 0   # the untrained client's channels all hold 0.5
        assert row[f"hbn_w_ch_move_{layer}"] == max(abs(v - 0.5) for c in channels for v in c.tolist())


def test_a_model_without_a_learned_factor_is_a_config_error(tmp_path):
    sim = build_simulation([*BASE[:-2], "norm=bn"], tmp_path, rounds=1)
    with pytest.raises(ConfigError, match="hybrid_factor"):
        METRICS.get("hybrid_factor")()(sim.evaluator.context())
