"""Issue 27: rules check their preconditions before any round, failed runs and sweep jobs say why,
and the small defects (empty rounds, old checkpoints, a missing launcher plugin, inactive keys)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from unittest import mock

import pandas as pd
import pytest
import torch

from conftest import ROOT, build_simulation, compose_config
from fedbn_bench.adversarial.eval_attacks import build_eval_attack
from fedbn_bench.adversarial.pixels import PixelSpace
from fedbn_bench.adversarial.training import ADVERSARIAL_TRAINING
from fedbn_bench.cli import missing_launcher
from fedbn_bench.core.aggregation import AGGREGATORS
from fedbn_bench.engine.checkpoint import FILENAME, load_checkpoint
from fedbn_bench.errors import ConfigError, UserError
from fedbn_bench.partition import PartitionError
from fedbn_bench.records.reader import read_run
from fedbn_bench.robust.aggregators import RobustConfig
from fedbn_bench.runner import run_experiment

TINY = ["rounds=2", "num_clients=4", "algo.local_steps=1", "eval_every=1"]


@pytest.mark.parametrize("name, f, smallest", [("krum", 2, 7), ("trimmed_mean", 2, 5), ("median", 2, 5),
                                               ("geometric_median", 3, 7), ("krum", 0, 3)])
@pytest.mark.parametrize("nnm", [False, True])
def test_robust_rules_refuse_too_few_clients_for_their_f(name, f, smallest, nnm):
    rule = AGGREGATORS.get(name)(RobustConfig(name=name, f=f, nnm=nnm))
    rule.check(smallest)
    with pytest.raises(ConfigError, match=rf"{name} with f={f} needs more than .* clients per round, got {smallest - 1}"):
        rule.check(smallest - 1)


def test_krum_f_against_clients_per_round_fails_before_any_round(tmp_path):
    cfg = compose_config([*TINY, "num_clients=10", "aggregator=krum", "aggregator.f=100"])
    with pytest.raises(ConfigError, match=r"krum with f=100 needs more than 2f \+ 2 = 202 clients per round, got 10"):
        run_experiment(cfg, tmp_path)
    assert not list(tmp_path.iterdir())


def test_pgd_steps_must_be_at_least_one():
    cfg = compose_config(["adversarial=pgd_at", "adversarial.steps=0"]).adversarial
    with pytest.raises(ConfigError, match="adversarial.steps=0 is invalid"):
        ADVERSARIAL_TRAINING.get("pgd_at")(cfg, PixelSpace.of(None, None, 1))
    with pytest.raises(ConfigError, match=r"pgd.steps must be an integer >= 1"):
        build_eval_attack("pgd", PixelSpace.of(None, None, 1), 10, steps=0)


def test_scaffold_without_local_epochs_is_one_validation_error(tmp_path):
    with pytest.raises(ConfigError, match="algo.local_epochs=0 is invalid"):
        run_experiment(compose_config(["algo=scaffold", "algo.local_epochs=0", "rounds=1"]), tmp_path)


def test_the_other_modes_count_of_shards_must_be_a_count(tmp_path):
    cfg = compose_config(["partition=shards", "partition.mode=classes", "partition.shards_per_client=0", "rounds=1"])
    with pytest.raises(PartitionError, match="shards_per_client must be >= 1"):
        run_experiment(cfg, tmp_path)


def test_a_round_where_nobody_trains_records_no_loss(tmp_path):
    sim = build_simulation(["num_clients=4", "algo.local_steps=1"], tmp_path, rounds=2)
    sample = sim.rounds.sample
    with mock.patch.object(sim.rounds, "sample", side_effect=lambda r: [] if r == 0 else sample(r)):
        summary = sim.run()
    assert summary["status"] == "completed"
    losses = pd.read_csv(tmp_path / "metrics.csv")["train_loss"].tolist()
    assert math.isnan(losses[0]) and losses[1] > 0


def test_an_old_checkpoint_format_says_to_start_again(tmp_path):
    torch.save({"format": 1, "rounds_completed": 3}, tmp_path / FILENAME)
    with pytest.raises(ConfigError, match="has format 1, this version reads format 3 only .* start the run again"):
        load_checkpoint(tmp_path)


def test_a_failed_run_records_error_type_message_and_round(tmp_path):
    def boom(self, round_idx):
        if round_idx == 1:
            raise RuntimeError("boom in the backend")
        return torch.tensor(1.0)

    with mock.patch("fedbn_bench.engine.round.RoundRunner.run_round", boom), pytest.raises(RuntimeError):
        run_experiment(compose_config(TINY), tmp_path / "during")
    summary = json.loads((tmp_path / "during/summary.json").read_text())
    assert (summary["status"], summary["error_type"], summary["error"], summary["error_round"]) == (
        "failed", "RuntimeError", "boom in the backend", 2)
    assert read_run(tmp_path / "during").status_text == "failed (RuntimeError: boom in the backend, round 2)"
    with mock.patch("fedbn_bench.runner.choose_engine", side_effect=KeyError("engine")), pytest.raises(KeyError):
        run_experiment(compose_config(TINY), tmp_path / "before")
    summary = json.loads((tmp_path / "before/summary.json").read_text())
    assert (summary["status"], summary["error_type"], summary["error_round"]) == ("failed", "KeyError", 0)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HYDRA_FULL_ERROR": "0"})


def test_a_sweep_lists_its_failed_jobs_at_the_end(tmp_path):
    result = cli("-m", "logger=none", "progress=false", *TINY, "rounds=1", "seed=0,-1", f"hydra.sweep.dir={tmp_path}")
    assert result.returncode == 1, result.stderr
    tail = result.stderr.strip().splitlines()[-2:]
    assert tail[0] == f"1 job(s) did not complete in {tmp_path}:", result.stderr
    assert "seed=-1" in tail[1] and "ConfigError: seed=-1 is invalid" in tail[1] and "before the first round" in tail[1]
    statuses = sorted(json.loads(p.read_text())["status"] for p in tmp_path.glob("*/summary.json"))
    assert statuses == ["completed", "failed"]


def test_a_launcher_without_its_plugin_is_one_line_naming_the_package():
    with mock.patch("importlib.util.find_spec", return_value=None):
        message = missing_launcher(["-m", "hydra/launcher=ray_cluster", "seed=0,1"])
    assert message == ("hydra/launcher=ray_cluster needs the Hydra plugin `hydra-ray-launcher`, which is not "
                       "installed: pip install hydra-ray-launcher")
    assert missing_launcher(["hydra/launcher=joblib"]) is None  # installed here
    assert missing_launcher(["norm=bn"]) is None
    if missing_launcher(["hydra/launcher=ray_cluster"]) is not None:
        result = cli("-m", "hydra/launcher=ray_cluster", "seed=0,1")
        assert result.returncode == 2 and result.stderr.strip().splitlines() == [
            "error: " + missing_launcher(["hydra/launcher=ray_cluster"])]


def test_user_errors_stay_user_errors():
    assert issubclass(PartitionError, UserError) and issubclass(ConfigError, UserError)


@pytest.mark.parametrize("overrides, message", [
    (["norm=bn", "norm.eps=-1"], "norm.eps=-1.0 is invalid"),
    (["norm=bn", "norm.momentum=0"], "norm.momentum=0.0 is invalid"),
    (["norm=gn", "norm.groups=0"], "norm.groups=0 is invalid"),
    (["norm=gn", "norm.groups=7"], "norm.groups=7 is invalid"),
    (["norm=fbn", "norm.num_clients=1000"], "norm.num_clients=1000 is invalid"),
    (["byzantine.gaussian_sigma=-1"], "byzantine.gaussian_sigma=-1.0 is invalid"),
    (["model=lenet", "model.options.variant=nope"], "lenet option 'variant' must be one of"),
    (["model=mlp", "model.options.init_std=nope"], "mlp option 'init_std' must be > 0 or null"),
    (["adversarial=pgd_at", "adversarial.eps=0"], "adversarial.eps=0.0 is invalid"),
    (["adversarial=pgd_at", "adversarial.step_size=0"], "adversarial.step_size=0.0 is invalid"),
    (["adversarial=pgd_at", "adversarial.eval_attacks=[nope]"], r"adversarial.eval_attacks\[0\]='nope' is invalid"),
])
def test_group_walk_findings_are_one_error_before_anything_is_written(overrides, message, tmp_path):
    """Values the group walk of the fuzzer (``tests/config_fuzz.py``) found ending in a traceback or
    accepted although the method cannot mean them: one ``ConfigError`` naming the key, nothing written."""
    with pytest.raises(ConfigError, match=message):
        run_experiment(compose_config([*TINY, *overrides]), tmp_path / "run")
    assert not (tmp_path / "run").exists() or not list((tmp_path / "run").iterdir())
