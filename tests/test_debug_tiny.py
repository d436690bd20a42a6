"""``debug=default`` makes any run tiny, whatever the dataset or preset: a few local steps and a
small test set, so a config is checked in seconds (before, each client trained a full epoch and
every evaluation used the whole test set: 170 s of silence on Fashion-MNIST)."""
from __future__ import annotations

import pytest

from conftest import CONF, compose_config
from fedbn_bench.errors import ConfigError
from fedbn_bench.runner import load_data, run_experiment

DATASETS = sorted(p.stem for p in (CONF / "dataset").glob("*.yaml"))
MAX_STEPS = 8
"""Local steps of a whole debug run: rounds × clients per round × local steps."""


@pytest.mark.parametrize("overrides", [[f"dataset={d}"] for d in DATASETS] + [
    ["experiment=fedbn/table11_digits"], ["experiment=fixbn/table1_fmnist"], ["experiment=hbn/table1_fmnist"],
    ["experiment=fedrbn/table2_digits"]], ids=lambda o: o[0])
def test_debug_is_a_few_steps_and_a_small_test_set_on_any_dataset_or_preset(overrides):
    cfg = compose_config([*overrides, "debug=default"])
    assert cfg.rounds * cfg.clients_per_round * cfg.algo.local_steps <= MAX_STEPS
    assert cfg.dataset.test_samples == 500 and cfg.logger.name == "none" and not cfg.progress


def test_test_samples_draws_a_seeded_subset_of_the_test_set():
    full = load_data(compose_config([]))
    small = load_data(compose_config(["dataset.test_samples=100"]))
    again = load_data(compose_config(["dataset.test_samples=100"]))
    assert len(small.test) == 100 < len(full.test) and len(small.train) == len(full.train)
    assert small.test.y.equal(again.test.y) and small.test.x.equal(again.test.x)
    assert len(set(small.test.y.tolist())) == full.num_classes  # a random draw, not the first rows
    with pytest.raises(ConfigError, match="dataset.test_samples=0 is invalid"):
        run_experiment(compose_config(["dataset.test_samples=0"]), "/nonexistent")


def test_a_debug_run_completes(tmp_path):
    summary = run_experiment(compose_config(["debug=default"]), tmp_path / "run")
    assert summary["status"] == "completed" and summary["rounds_completed"] == 2
