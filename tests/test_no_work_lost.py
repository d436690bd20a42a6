"""No work lost on any path (issue 59): a completed record outlives every attempt over it that does not
complete a round (a job killed while loading its data, before its lock, a failure in round 1 with
``overwrite=true``), and a requeued ``overwrite=true`` job keeps the checkpoint it resumes from."""
from __future__ import annotations

import json
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from omegaconf import DictConfig, OmegaConf

from conftest import compose_config
from fedbn_bench.engine import checkpoint as ckpt
from fedbn_bench.engine.round import RoundRunner
from fedbn_bench.records.run_records import RunRecorder
from fedbn_bench.records.sweep_report import FAILED_ATTEMPT, job_problem
from fedbn_bench.runner import prepare_run, run_experiment
from hydra_plugins.fedbn_bench_launcher.process_launcher import _died

SMALL = ["model=simple_cnn", "num_clients=4", "batch_size=32", "eval_every=1", "dataset=sklearn_digits"]
COMPLETED = {"status": "completed", "rounds_completed": 3, "final_test_acc": 0.8}


def records(run_dir: Path) -> dict[str, bytes]:
    """Every file of the run in ``run_dir`` but its failed attempt's record."""
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*"))
            if p.is_file() and p.name != FAILED_ATTEMPT}


def job_config(sweep_dir: Path) -> DictConfig:
    return OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep_dir), "subdir": "0_seed=0"},
                                       "overrides": {"task": ["seed=0"]}}})


@pytest.mark.parametrize("lock", [None, "its own"])
def test_a_job_killed_before_its_first_round_leaves_the_completed_record(tmp_path, lock):
    """SIGKILL (the out-of-memory killer) while the job loads its data over a completed run, with its lock
    taken or before it took it: the launcher wrote ``failed`` over the completed ``summary.json``."""
    job_dir = tmp_path / "0_seed=0"
    RunRecorder(job_dir).write_summary(COMPLETED)
    before = records(job_dir)
    process = SimpleNamespace(pid=4242, exitcode=-signal.SIGKILL)
    if lock:
        (job_dir / ".run.lock").write_text(json.dumps({"pid": process.pid, "host": "here"}))
        before = records(job_dir)
    _died(job_config(tmp_path), process)
    assert records(job_dir) == before
    attempt = json.loads((job_dir / FAILED_ATTEMPT).read_text())
    assert (attempt["status"], attempt["error_type"], attempt["error_round"]) == ("failed", "ProcessDied", 1)
    assert job_problem(job_dir).endswith("(the completed run there is left as it was)")


def failing_in_every_round(monkeypatch) -> None:
    def run_round(self, r):
        raise RuntimeError(f"broke in round {r + 1}")

    monkeypatch.setattr(RoundRunner, "run_round", run_round)


def test_overwrite_failing_in_round_1_leaves_the_completed_record(tmp_path, monkeypatch):
    """``overwrite=true`` removed the completed records when the new run was built; a failure in its round
    1 then left a ``failed`` summary and no ``failed_attempt.json``."""
    run_dir = tmp_path / "run"
    run_experiment(compose_config([*SMALL, "rounds=2"]), run_dir)
    before = records(run_dir)
    assert json.loads(before["summary.json"])["status"] == "completed"
    failing_in_every_round(monkeypatch)
    with pytest.raises(RuntimeError, match="broke in round 1"):
        run_experiment(compose_config([*SMALL, "rounds=3", "overwrite=true"]), run_dir)
    assert records(run_dir) == before
    attempt = json.loads((run_dir / FAILED_ATTEMPT).read_text())
    assert (attempt["status"], attempt["error_round"]) == ("failed", 1)


def test_overwrite_replaces_the_record_once_a_round_is_done(tmp_path):
    run_dir = tmp_path / "run"
    run_experiment(compose_config([*SMALL, "rounds=2"]), run_dir)
    run_experiment(compose_config([*SMALL, "rounds=1", "overwrite=true"]), run_dir)
    assert json.loads((run_dir / "summary.json").read_text())["rounds_completed"] == 1
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoint.pt", "metrics.csv", "partition.csv",
                                                        "summary.json"]


def test_a_requeued_overwrite_job_keeps_the_checkpoint_it_resumes_from(tmp_path):
    """SLURM requeues a job with its overrides (``overwrite=true``) and ``resume=auto``: ``start_over`` then
    deleted the checkpoint just loaded, so a second stop before the next checkpoint restarted at round 0."""
    run_dir = tmp_path / "run"
    run_experiment(compose_config([*SMALL, "rounds=2"]), run_dir)
    requeued = compose_config([*SMALL, "rounds=4", "overwrite=true", f"resume={run_dir}"])
    sim = prepare_run(requeued, run_dir, torch.device("cpu"), 1)
    assert sim.loop.rounds_completed == 2
    assert torch.load(run_dir / ckpt.FILENAME, weights_only=True)["rounds_completed"] == 2
    assert (run_dir / "metrics.csv").read_text().count("\n") == 3
