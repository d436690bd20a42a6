"""``client_train_loss`` (FedBN Fig. 3's "Train Loss"): each client's model after aggregation, in eval mode, on
that client's own training samples. After a FedBN run the last row equals, client by client, the loss of the
global weights with that client's own BN on its training indices (different BN, different losses); under FedAvg
every client holds the global model."""
from __future__ import annotations

import csv

import pytest
import torch
import torch.nn.functional as F

from conftest import build_simulation
from fedbn_bench.metrics import METRICS

BASE = ["model=simple_cnn", "num_clients=3", "algo.local_steps=1", "batch_size=32", "partition=iid"]
CSV = 1e-5
"""metrics.csv keeps six significant digits."""


def last_row(path) -> dict[str, float]:
    with (path / "metrics.csv").open() as f:
        return {k: float(v) for k, v in list(csv.DictReader(f))[-1].items() if v not in ("", None)}


def by_hand(sim, client: int) -> tuple[float, float]:
    """Client ``client``'s model (global state, then its own local keys) in eval mode on its training samples."""
    fed, store = sim.fed, sim.store
    store.load_client(fed.model, client)
    fed.model.eval()
    idx = store.records[client].indices
    with torch.no_grad():
        logits = fed.model(fed.data.train.x[idx])
    y = fed.data.train.y[idx]
    return F.cross_entropy(logits, y).item(), (logits.argmax(1) == y).double().mean().item()


@pytest.mark.parametrize("norm", ["fedbn", "bn"])
def test_each_client_s_model_after_aggregation_on_its_training_data(tmp_path, norm):
    sim = build_simulation([*BASE, f"norm={norm}"], tmp_path, rounds=1)
    sim.evaluator.metrics.append(METRICS.get("client_train_loss")())
    sim.run()
    row = last_row(tmp_path)
    losses = []
    for client in range(3):
        loss, acc = by_hand(sim, client)
        assert row[f"client_train_loss_{client}"] == pytest.approx(loss, rel=CSV)
        assert row[f"client_train_acc_{client}"] == pytest.approx(acc, rel=CSV)
        losses.append(loss)
    assert row["client_train_loss"] == pytest.approx(sum(losses) / 3, rel=CSV)
    local = [sim.store.client_local[c] for c in range(3)] if norm == "fedbn" else []
    if local:   # FedBN: each client's own BN statistics act, so the clients' models differ
        key = next(k for k in local[0] if k.endswith("running_mean"))
        assert not torch.equal(local[0][key], local[1][key])
