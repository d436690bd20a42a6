"""Personalized evaluation for the FedBN tables (FedBN §5, Fig. 5 / Table 1): per-client and
per-domain accuracy of each client's own model, ``test_acc`` as the unweighted mean over domains;
the per-client validation split (``val_fraction``), ``val_acc`` and the test accuracy at the best
validation round (FedBN's code for Office-Caltech10 / DomainNet).
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from conftest import compose_config
from fedbn_bench import runner
from fedbn_bench.engine.federation import hold_out_validation
from fedbn_bench.engine.simulation import Simulation
from fedbn_bench.errors import ConfigError
from fedbn_bench.metrics import METRICS, EvalContext, evaluate
from fedbn_bench.metrics.base import mean_over_domains
from fedbn_bench.partition import make_partition, partition_params
from fedbn_bench.records.reader import read_run
from fedbn_bench.records.selection import best_validation
from fedbn_bench.runner import build_federation, run_experiment

TINY = ["debug=default", "partition=domains", "partition.num_domains=2", "num_clients=4", "clients_per_round=4",
        "algo.local_steps=2", "batch_size=8", "val_fraction=0.25"]


class Keep(Simulation):
    """The engine, kept for inspection after ``run_experiment`` returns."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        Keep.last = self


def run(tmp_path, overrides: list[str]) -> tuple[Keep, dict]:
    mp = pytest.MonkeyPatch()
    mp.setattr(runner, "Simulation", Keep)
    try:
        summary = run_experiment(compose_config(overrides), tmp_path)
    finally:
        mp.undo()
    assert summary["status"] == "completed"
    return Keep.last, summary


@pytest.fixture(scope="module")
def fedbn(tmp_path_factory):
    """FedBN, 2 synthetic domains × 2 clients, a quarter of each client's data held out."""
    return run(tmp_path_factory.mktemp("fedbn"), ["norm=fedbn", *TINY])


def own_accuracy(sim: Keep, client: int, split: str) -> float:
    """Client ``client``'s own model on its test split or its validation data, recomputed."""
    fed, record = sim.fed, sim.store.records[client]
    sim.store.load_client(fed.model, client)
    data, idx = (fed.data.test, record.test_indices) if split == "test" else (fed.data.train, record.val_indices)
    return evaluate(fed.model, data.x[idx], data.y[idx])[0]


def test_personalized_columns_match_a_hand_recomputation(fedbn):
    sim, summary = fedbn
    row, names = sim.loop.history[-1], sim.fed.data.domain_names
    assert [r.domain for r in sim.store.records] == [0, 0, 1, 1]
    test = [own_accuracy(sim, c, "test") for c in range(4)]
    val = [own_accuracy(sim, c, "val") for c in range(4)]
    per_client = read_run(sim.loop.recorder.run_dir).client_values("client_acc")[int(row["round"])]
    assert per_client == {client: pytest.approx(test[client], abs=1e-6) for client in range(4)}  # written to 6 digits
    per_domain = {names[0]: (test[0] + test[1]) / 2, names[1]: (test[2] + test[3]) / 2}
    for name, acc in per_domain.items():
        assert row[f"acc_{name}"] == pytest.approx(acc)
    assert row["test_acc"] == pytest.approx(sum(per_domain.values()) / 2) == summary["final_test_acc"]
    assert row["val_acc"] == pytest.approx(((val[0] + val[1]) / 2 + (val[2] + val[3]) / 2) / 2)
    assert row["client_acc_min"] == pytest.approx(min(test))


def test_test_acc_is_the_mean_over_domains_not_over_clients():
    """Three clients, two of them in domain ``a``: the clients' own models (constant predictors)
    score 1, 1, 0 on their domain's test split, so the domain mean is 0.5 and the client mean 2/3."""
    model = nn.Linear(1, 2)
    states = [{"weight": torch.zeros(2, 1), "bias": torch.tensor([float(c != 2), float(c == 2)])} for c in range(3)]
    x, y = torch.zeros(6, 1), torch.zeros(6, dtype=torch.long)  # every label is class 0
    val = [torch.tensor([0, 1]), torch.tensor([2]), torch.tensor([3, 4, 5])]
    ctx = EvalContext(model=model, test_x=x, test_y=y, load_global=lambda: None,
                      load_client=lambda c: model.load_state_dict(states[c]),
                      client_test=[torch.tensor([0, 1]), torch.tensor([0, 1]), torch.tensor([2, 3, 4, 5])],
                      train_x=x, train_y=y, client_val=val, client_domain=["a", "a", "b"])
    row = METRICS.get("client_accuracy")()(ctx)
    assert row["test_acc"] == pytest.approx(0.5) and row["val_acc"] == pytest.approx(0.5)
    assert row["client_acc_mean"] == pytest.approx(2 / 3)
    assert (row["acc_a"], row["acc_b"]) == (1.0, 0.0)
    assert mean_over_domains([1.0, 1.0, 0.0], [None, None, None]) == (pytest.approx(2 / 3), {})


def test_global_model_validation_is_pooled_over_the_clients_validation_data(tmp_path):
    sim, summary = run(tmp_path, ["norm=bn", *TINY])
    fed, row = sim.fed, sim.loop.history[-1]
    assert not sim.personalized
    idx = torch.cat([r.val_indices for r in sim.store.records])
    fed.model.load_state_dict(sim.store.global_state)
    assert row["val_acc"] == pytest.approx(evaluate(fed.model, fed.data.train.x[idx], fed.data.train.y[idx])[0])
    assert summary["best_val_round"] in (1, 2)


def test_validation_split_is_disjoint_from_training_and_deterministic():
    cfg = compose_config(["norm=fedbn", *TINY])
    fed, _ = build_federation(cfg, torch.device("cpu"))
    p = cfg.partition
    parts = make_partition(p.name, fed.data.train.y, cfg.num_clients, cfg.seed, domains=fed.data.train.domain,
                           **partition_params(p))
    for part, record in zip(parts, fed.clients):
        train, val = record.indices.tolist(), record.val_indices.tolist()
        assert not set(train) & set(val)
        assert sorted(train + val) == sorted(part.tolist())  # nothing lost, nothing added
        assert len(val) == int(0.25 * len(part))
    again, _ = build_federation(cfg, torch.device("cpu"))
    assert all(torch.equal(a.val_indices, b.val_indices) and torch.equal(a.indices, b.indices)
               for a, b in zip(fed.clients, again.clients))
    other, _ = build_federation(compose_config(["norm=fedbn", *TINY, "seed=1"]), torch.device("cpu"))
    assert any(not torch.equal(a.val_indices, b.val_indices) for a, b in zip(fed.clients, other.clients))


def test_hold_out_validation_draws_a_random_share_per_client():
    indices = torch.arange(100, 200)
    train, val = hold_out_validation(indices, 0.3, seed=0, client=0)
    assert len(val) == 30 and len(train) == 70 and not set(train.tolist()) & set(val.tolist())
    assert torch.equal(torch.sort(torch.cat([train, val])).values, indices)
    assert not torch.equal(val, hold_out_validation(indices, 0.3, seed=0, client=1)[1])  # per client
    assert len(hold_out_validation(indices, 0.001, seed=0, client=0)[1]) == 1  # at least one sample


def test_best_validation_round_on_hand_made_rows():
    rows = [{"round": 1, "test_acc": 0.5, "val_acc": 0.4}, {"round": 2, "test_acc": 0.9, "val_acc": 0.6},
            {"round": 3, "test_acc": 0.7, "val_acc": 0.7}, {"round": 4, "test_acc": 0.8, "val_acc": 0.7}]
    assert best_validation(rows) == {"best_val_round": 3, "model_selection": "val_acc",
                                     "test_acc_at_best_val": 0.7}  # earliest of the ties
    robust = [{**row, "robust_acc": r, "val_select": v} for row, r, v in zip(rows, (0.1, 0.2, 0.3, 0.4), (0.9, 0.1, 0, 0))]
    assert best_validation(robust) == {"best_val_round": 1, "model_selection": "val_select",  # FedRBN's score
                                       "test_acc_at_best_val": 0.5, "robust_acc_at_best_val": 0.1}
    assert best_validation([{"round": 1, "test_acc": 0.5}]) == {}
    assert best_validation([]) == {}


def test_summary_reports_the_test_accuracy_at_the_best_validation_round(fedbn):
    sim, summary = fedbn
    assert len(sim.loop.history) == 2
    best = max(sim.loop.history, key=lambda r: r["val_acc"])
    assert summary["best_val_round"] == best["round"]
    assert summary["test_acc_at_best_val"] == best["test_acc"]


def test_no_validation_columns_or_summary_keys_by_default(tmp_path):
    sim, summary = run(tmp_path, ["norm=fedbn", *TINY[:-1], "rounds=1"])
    assert all(r.val_indices is None for r in sim.store.records)
    assert "val_acc" not in sim.loop.history[-1]
    assert "best_val_round" not in summary and "test_acc_at_best_val" not in summary


@pytest.mark.parametrize("overrides, message", [
    (["val_fraction=1"], r"val_fraction=1.0 is invalid: .* must be in \[0, 1\)"),
    (["val_fraction=-0.1"], r"val_fraction=-0.1 is invalid"),
    (["val_fraction=0.9", "batch_size=100"], r"val_fraction=0.9 leaves client 0 \d+ of its \d+ samples for "
                                             r"training, fewer than batch_size=100; lower `val_fraction`"),
])
def test_bad_val_fraction_is_one_clear_error(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        run_experiment(compose_config(["norm=fedbn", *TINY, *overrides]), tmp_path)
