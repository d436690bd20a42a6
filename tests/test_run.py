"""End-to-end: the default run learns, records follow the contract, bad input fails fast, sweeps work."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import torch
import pytest

from conftest import ROOT, compose_config
from fedbn_bench.records.run_records import METRIC_COLUMNS
from fedbn_bench.runner import run_experiment

SUMMARY_KEYS = {"status", "final_test_acc", "best_test_acc", "rounds_completed", "wall_time_s", "samples_per_s"}


def cli(*args: str, cwd: Path = ROOT, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "WANDB_MODE": "offline"}
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args, "progress=false"],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env,
    )


def test_default_run_learns_and_writes_the_contract(tmp_path):
    cfg = compose_config(["rounds=10"])
    summary = run_experiment(cfg, tmp_path)
    assert summary["status"] == "completed" and summary["rounds_completed"] == 10
    assert summary["final_test_acc"] > 0.85, summary  # chance is 0.10
    assert SUMMARY_KEYS <= set(json.loads((tmp_path / "summary.json").read_text()))
    metrics = pd.read_csv(tmp_path / "metrics.csv")
    assert list(metrics.columns[: len(METRIC_COLUMNS)]) == list(METRIC_COLUMNS)
    assert metrics["round"].tolist() == [5, 10]
    partition = pd.read_csv(tmp_path / "partition.csv", index_col="client")
    assert partition.shape[0] == cfg.num_clients
    assert partition["total"].sum() == 1437  # every training sample of sklearn_digits, once


def test_runs_are_deterministic_given_the_seed(tmp_path):
    overrides = ["rounds=2", "eval_every=1", "num_clients=4", "algo.local_steps=3"]
    a = run_experiment(compose_config(overrides), tmp_path / "a")
    b = run_experiment(compose_config(overrides), tmp_path / "b")
    cols = ["test_acc", "test_loss", "train_loss"]
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "a/metrics.csv")[cols], pd.read_csv(tmp_path / "b/metrics.csv")[cols])
    assert a["final_test_acc"] == b["final_test_acc"]


def test_nan_loss_stops_with_status_diverged_and_keeps_records(tmp_path):
    summary = run_experiment(compose_config(["norm=none", "lr=50", "rounds=5", "algo.clip_grad_norm=null"]), tmp_path)
    assert summary["status"] == "diverged" and summary["rounds_completed"] < 5
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "diverged"
    assert len(pd.read_csv(tmp_path / "metrics.csv")) == summary["rounds_completed"]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["partition=dirichlet", "alpha=-1"], "alpha"),
        (["partition=gamma", "gamma=1.5"], "gamma"),
        (["num_clients=5000"], "num_clients"),
        (["batch_size=500"], "batch_size"),
        (["dataset=cifar10", "dataset.root=/nonexistent"], "/nonexistent"),
    ],
)
def test_bad_input_fails_fast_with_one_clear_line(tmp_path, args, needle):
    result = cli("logger=none", f"hydra.run.dir={tmp_path}", *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and needle in lines[-1], result.stderr
    assert not (tmp_path / "metrics.csv").exists()


def test_unknown_group_option_lists_the_allowed_ones(tmp_path):
    result = cli("norm=foo", f"hydra.run.dir={tmp_path}")
    assert result.returncode != 0
    assert result.returncode == 2 and result.stderr.startswith("error: norm=foo is not an option of `norm`")
    assert "gn" in result.stderr and not list(tmp_path.iterdir())


def test_two_job_multirun_with_wandb_offline(tmp_path):
    result = cli("-m", "norm=bn,gn", "rounds=1", "num_clients=4", "algo.local_steps=2", f"hydra.sweep.dir={tmp_path}")
    assert result.returncode == 0, result.stderr
    summaries = sorted(tmp_path.glob("*/summary.json"))
    assert len(summaries) == 2
    assert all(json.loads(p.read_text())["status"] == "completed" for p in summaries)
    runs = sorted(tmp_path.glob("*/wandb/offline-run-*/*.wandb"))
    assert len(runs) == 2
    for run, norm in zip(runs, ("bn", "gn")):  # what W&B stores: grouped by the sweep, tagged, named apart
        stored = run.read_bytes()
        assert str(tmp_path).encode() in stored and f"{norm}-fedavg-dirichlet-s0 norm={norm}".encode() in stored


def test_the_summary_names_the_torch_build_and_the_cpu(tmp_path):
    """Float32 results depend on both (issue 51), so every run records them."""
    from fedbn_bench.records.machine import cpu_model

    summary = run_experiment(compose_config(["rounds=1", "logger=none", "progress=false", "device=cpu"]), tmp_path)
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["torch"] == torch.__version__ and written["cpu"] == cpu_model() != ""
    assert "gpu" not in written and summary["torch"] == written["torch"]
