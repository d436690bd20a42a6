"""``replicas=k``: k seeds trained in one pass give the records of k separate runs (float64)."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

from conftest import build_simulation, compose_config
from fedbn_bench.engine.replicas import ReplicaGroup
from fedbn_bench.errors import ConfigError
from fedbn_bench.records.reader import read_runs
from fedbn_bench.runner import run_experiment

BASE = ["model=simple_cnn", "num_clients=4", "clients_per_round=3", "batch_size=8", "algo.local_steps=3"]
"""A model without dropout: one stacked round makes one dropout draw for all its clients (engine/replicas.py)."""
ROUNDS = 3
SEEDS = (0, 1, 2)


def metric_rows(run_dir) -> list[dict[str, float]]:
    """The rows of ``metrics.csv`` without the wall-clock column."""
    with (run_dir / "metrics.csv").open() as f:
        return [{k: float(v) for k, v in row.items() if k != "wall_s" and v != ""} for row in csv.DictReader(f)]


def assert_rows_equal(got: list[dict[str, float]], want: list[dict[str, float]]) -> None:
    assert len(got) == len(want) == ROUNDS
    for g, w in zip(got, want):
        assert g.keys() == w.keys()
        for key in w:
            assert g[key] == pytest.approx(w[key], rel=1e-9, abs=1e-11), key


def replicas_and_separate(overrides: list[str], engine: str, tmp_path) -> ReplicaGroup:
    sims = [build_simulation([*BASE, *overrides, f"seed={s}"], tmp_path / "group" / f"seed_{s}", ROUNDS,
                             engine=engine) for s in SEEDS]
    group = ReplicaGroup(sims, progress=False)
    summaries = group.run()
    assert [s["status"] for s in summaries] == ["completed"] * len(SEEDS)
    for s in SEEDS:
        alone = build_simulation([*BASE, *overrides, f"seed={s}"], tmp_path / "alone" / f"seed_{s}", ROUNDS,
                                 engine=engine)
        alone.run()
        assert_rows_equal(metric_rows(tmp_path / "group" / f"seed_{s}"), metric_rows(tmp_path / "alone" / f"seed_{s}"))
    return group


@pytest.mark.parametrize("engine", ["packed", "vmap"])
def test_replicas_on_one_stack_equal_separate_runs(engine, tmp_path):
    group = replicas_and_separate(["norm=bn", "algo=fedprox"], engine, tmp_path)
    assert group.unshared is None  # one backend call trained the three replicas' clients


def test_replicas_keep_their_own_data_and_local_state(tmp_path):
    """Synthetic domains are drawn from the seed: each job must train on its own run's data, and
    FedBN's local BN stays with each replica's clients."""
    group = replicas_and_separate(["partition=domains", "num_clients=5", "clients_per_round=5", "norm=fedbn"], "packed",
                                  tmp_path)
    assert group.unshared is None
    first, second = (group.sims[i].fed.data.train.x for i in (0, 1))
    assert not torch.equal(first, second)


@pytest.mark.parametrize("overrides, engine, reason", [
    (["algo=scaffold"], "packed", "algo=scaffold"),
    (["algo.momentum_carry=global"], "packed", "algo=fedavg"),
    ([], "loop", "engine=loop"),
    (["norm=fedrbn", "adversarial=pgd_at", "adversarial.steps=1", "adversarial.at_fraction=0.5",
      "adversarial.eval_attacks.0.steps=1"], "packed", "pixel space"),
])
def test_replicas_that_cannot_share_a_backend_train_apart_and_still_equal_separate_runs(overrides, engine, reason,
                                                                                      tmp_path):
    group = replicas_and_separate(overrides, engine, tmp_path)
    assert reason in group.unshared


def test_run_experiment_writes_one_ordinary_run_directory_per_seed(tmp_path):
    cfg = compose_config(["replicas=2", "seed=5", "rounds=2", "num_clients=3", "engine=packed", "eval_every=1",
                          "model=simple_cnn"])
    hydra_dir = tmp_path / ".hydra"
    hydra_dir.mkdir()
    (hydra_dir / "overrides.yaml").write_text("- replicas=2\n- seed=5\n- rounds=2\n")
    summary = run_experiment(cfg, tmp_path)
    assert summary["seeds"] == [5, 6] and summary["shared_backend"]
    finals = [r["final_test_acc"] for r in summary["replicas"]]
    assert summary["final_test_acc"] == pytest.approx(sum(finals) / 2)
    assert json.loads((tmp_path / "replicas.json").read_text())["seeds"] == [5, 6]
    runs = read_runs(tmp_path)
    assert [r.path.name for r in runs] == ["seed_5", "seed_6"]  # the group directory is not a run
    assert [r.override("seed") for r in runs] == ["5", "6"]
    assert [r.get("replicas") for r in runs] == [1, 1]
    assert [r.status for r in runs] == ["completed", "completed"]
    assert all(r.override("replicas") is None and r.override("rounds") == "2" for r in runs)


def test_diverging_replicas_stop_with_their_records(tmp_path):
    cfg = compose_config(["replicas=2", "rounds=3", "num_clients=3", "engine=packed", "lr=1e6", "eval_every=1"])
    summary = run_experiment(cfg, tmp_path)
    assert summary["status"] == "diverged"
    for replica in summary["replicas"]:
        assert replica["status"] == "diverged" and replica["rounds_completed"] < 3
        assert (Path(replica["run_dir"]) / "metrics.csv").exists()


@pytest.mark.parametrize("overrides, key", [
    (["replicas=0"], "replicas=0"),
    (["replicas=2", "resume=/tmp/x"], "resume="),
    (["replicas=2", "count_macs=true"], "count_macs=true"),
])
def test_bad_replica_settings_are_refused_before_training(overrides, key, tmp_path):
    with pytest.raises(ConfigError, match=key):
        run_experiment(compose_config(overrides), tmp_path)
    assert not any(tmp_path.iterdir())


def test_replicas_of_a_model_with_dropout_equal_separate_runs(tmp_path):
    """Issue 52 §5: fbn_cnn's Dropout(0.25) under one stack made one dropout draw for every replica's clients, so a
    replica's curve left its separate run's (seed 2: 95.83 % against 84.72 % after 10 rounds); now each replica
    trains on its own backend, whose stack and dropout draws are its separate run's."""
    overrides = [o for o in BASE if not o.startswith("model=")]
    sims = [build_simulation([*overrides, "model=fbn_cnn", "norm=bn", f"seed={s}"], tmp_path / f"group{s}", ROUNDS,
                             engine="packed") for s in SEEDS]
    group = ReplicaGroup(sims, progress=False)
    group.run()
    for s in SEEDS:
        alone = build_simulation([*overrides, "model=fbn_cnn", "norm=bn", f"seed={s}"], tmp_path / f"alone{s}", ROUNDS,
                                 engine="packed")
        alone.run()
        assert metric_rows(tmp_path / f"group{s}") == metric_rows(tmp_path / f"alone{s}"), s
    assert "dropout" in group.unshared
