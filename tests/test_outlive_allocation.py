"""Runs that outlive their allocation (issue 50), without a cluster: a stop asked for by SLURM's
warning finishes the round, checkpoints it and resumes to the records of an uninterrupted run; a
requeued job resumes; a run directory is claimed by one live run only (``records/run_lock.py``).
The same on a real SLURM cluster: ``tests/test_slurm_cluster.py`` (slow)."""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from conftest import ROOT, compose_config
from fedbn_bench.engine import checkpoint as ckpt
from fedbn_bench.engine.round import RoundRunner
from fedbn_bench.errors import Stopped
from fedbn_bench.records import run_lock
from fedbn_bench.runner import run_experiment
from fedbn_bench.stopping import clear_stop_request, stop_after_round
from hydra_plugins.fedbn_bench_launcher.process_launcher import GpuSlots, visible_gpus
from hydra_plugins.fedbn_bench_launcher import slurm_launcher
from hydra_plugins.fedbn_bench_launcher.slurm_launcher import requeued_overrides

SMALL = ["model=simple_cnn", "num_clients=5", "clients_per_round=3", "batch_size=32", "algo.local_steps=2"]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
       "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0"}


@pytest.fixture(autouse=True)
def no_stop_request():
    clear_stop_request()
    yield
    clear_stop_request()


def signal_during(monkeypatch, round_idx: int, *signums: int) -> None:
    """Deliver ``signums`` (to ``stop_after_round``, as a SLURM job's handler) while round ``round_idx`` trains."""
    original = RoundRunner.run_round

    def run_round(self, r):
        loss = original(self, r)
        if r == round_idx:
            for signum in signums:
                stop_after_round(signum)
        return loss

    monkeypatch.setattr(RoundRunner, "run_round", run_round)


def test_the_warning_finishes_the_round_checkpoints_it_and_the_resumed_run_equals_the_whole(tmp_path, monkeypatch):
    """Warned during round 3 of 6 (checkpoints every 4): the run ends after round 3 with a checkpoint
    of round 3, and resuming it gives metrics.csv (each round once) and a final state equal to a run
    left alone, bit for bit."""
    common = [*SMALL, "rounds=6", "eval_every=1", "checkpoint_every=4"]
    whole = run_experiment(compose_config(common), tmp_path / "whole")
    with monkeypatch.context() as m:
        signal_during(m, 2, signal.SIGUSR2)
        cut = run_experiment(compose_config(common), tmp_path / "cut")
    assert (cut["status"], cut["stopped_by"], cut["rounds_completed"], cut["checkpoint_round"]) == \
        ("interrupted", "SIGUSR2", 3, 3)
    assert torch.load(tmp_path / "cut" / ckpt.FILENAME, weights_only=True)["rounds_completed"] == 3
    clear_stop_request()
    resumed = run_experiment(compose_config([*common, f"resume={tmp_path / 'cut'}"]), tmp_path / "cut")
    assert resumed["status"] == "completed"
    cut_rows, whole_rows = (pd.read_csv(tmp_path / d / "metrics.csv").drop(columns="wall_s") for d in ("cut", "whole"))
    assert cut_rows["round"].tolist() == list(range(1, 7))
    pd.testing.assert_frame_equal(cut_rows, whole_rows)
    final = [torch.load(tmp_path / d / ckpt.FILENAME, weights_only=True)["store"] for d in ("cut", "whole")]
    assert final[0].keys() == final[1].keys()
    for key in final[0]:
        assert_equal_states(final[0][key], final[1][key])


def assert_equal_states(a, b) -> None:
    if isinstance(a, torch.Tensor):
        assert torch.equal(a.double(), b.double())
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_equal_states(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_equal_states(x, y)
    else:
        assert a == b


def test_the_time_limit_after_the_warning_abandons_the_round(tmp_path, monkeypatch):
    """SIGTERM after the warning (the limit itself): the round under way is abandoned; the same
    signal twice (SLURM sends SIGTERM to the step and through srun) is one request."""
    stop_after_round(signal.SIGTERM)
    stop_after_round(signal.SIGTERM)
    clear_stop_request()
    stop_after_round(signal.SIGUSR2)
    with pytest.raises(Stopped) as stop:
        stop_after_round(signal.SIGTERM)
    assert stop.value.name == "SIGTERM"


def test_a_warning_in_the_last_round_lets_the_run_complete(tmp_path, monkeypatch):
    signal_during(monkeypatch, 1, signal.SIGUSR2)
    done = run_experiment(compose_config([*SMALL, "rounds=2", "eval_every=2"]), tmp_path)
    assert (done["status"], done["rounds_completed"]) == ("completed", 2)


def test_a_requeued_job_resumes(monkeypatch):
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    assert requeued_overrides(["norm=bn"]) == ["norm=bn"]
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")
    assert requeued_overrides(["norm=bn"]) == ["norm=bn", "resume=auto"]
    assert requeued_overrides(["norm=bn", "resume=auto"]) == ["norm=bn", "resume=auto"]


# -- the run directory's claim ---------------------------------------------------------------------
def start(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "run.py"), *args], cwd=cwd, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_two_runs_in_one_explicit_directory_at_once_one_is_refused(tmp_path):
    """Both started at the same moment with the same ``hydra.run.dir``: exactly one runs, the other
    is one ``error:`` line (exit 2) naming the holder, and the directory holds the first's records
    only (its seed in .hydra, one metrics row per round) with its lock released."""
    runs = {seed: start(*SMALL, "logger=none", "progress=false", "rounds=2", "eval_every=1", f"seed={seed}",
                        "hydra.run.dir=shared", cwd=tmp_path) for seed in (3, 4)}
    results = {seed: (proc.wait(timeout=600), proc.communicate()[1]) for seed, proc in runs.items()}
    codes = sorted(code for code, _ in results.values())
    assert codes == [0, 2], results
    refused = next(err for code, err in results.values() if code == 2)
    winner = next(seed for seed, (code, _) in results.items() if code == 0)
    assert refused.strip().splitlines()[-1].startswith("error: shared is in use by another run (process ")
    run_dir = tmp_path / "shared"
    assert f"- seed={winner}" in (run_dir / ".hydra/overrides.yaml").read_text()
    assert torch.load(run_dir / ckpt.FILENAME, weights_only=True)["config"]["seed"] == winner
    assert pd.read_csv(run_dir / "metrics.csv")["round"].tolist() == [1, 2]
    assert not (run_dir / run_lock.LOCK).exists()


def test_a_taken_directory_reads_the_same_relative_or_absolute(tmp_path, monkeypatch):
    """The refusal names the directory the same way whether the check saw it as given (relative) or after Hydra
    made it absolute (the two runs racing for one directory met either, and the message changed with the race)."""
    run_dir = tmp_path / "shared"
    run_dir.mkdir()
    (run_dir / run_lock.LOCK).write_text(json.dumps({"pid": os.getppid(), "host": os.uname().nodename,
                                                     "slurm_job_id": None, "started": "then"}))
    monkeypatch.chdir(tmp_path)
    for given in ("shared", run_dir):
        with pytest.raises(run_lock.DirectoryInUse, match=r"^shared is in use by another run \(process "):
            run_lock.acquire(given)
    monkeypatch.chdir(run_dir)
    with pytest.raises(run_lock.DirectoryInUse, match=f"^{run_dir} is in use"):
        run_lock.acquire(run_dir)


def test_a_stale_lock_is_named_and_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / run_lock.LOCK).write_text(json.dumps({"pid": dead.pid, "host": os.uname().nodename,
                                                     "slurm_job_id": None, "started": "then"}))
    proc = start(*SMALL, "logger=none", "progress=false", "rounds=1", f"hydra.run.dir={run_dir}", cwd=tmp_path)
    code, err = proc.wait(timeout=600), proc.communicate()[1]
    assert code == 0, err[-2000:]
    assert f"taken over from process {dead.pid} on host {os.uname().nodename}" in err
    assert "a stale lock: that process no longer exists" in err
    assert not (run_dir / run_lock.LOCK).exists()


def test_a_requeued_slurm_job_takes_its_directory_back_and_no_other_run_does(tmp_path, monkeypatch):
    alive = {"pid": os.getppid(), "host": os.uname().nodename, "slurm_job_id": "41_2", "started": "then"}
    (tmp_path / run_lock.LOCK).write_text(json.dumps(alive))
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "41")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    with pytest.raises(run_lock.DirectoryInUse, match=r"in use by another run \(process .* \(SLURM job 41_2\)"):
        run_lock.acquire(tmp_path)
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "2")
    run_lock.acquire(tmp_path)
    assert run_lock.holder(tmp_path)["pid"] == os.getpid()
    run_lock.release(tmp_path)
    assert run_lock.holder(tmp_path) is None


# -- one node, several GPUs ------------------------------------------------------------------------
def test_jobs_take_the_gpus_in_turn_with_jobs_per_gpu_at_most_on_one():
    slots = GpuSlots(["7", "9"], jobs_per_gpu=2)
    assert slots.capacity == 4
    assert [slots.take(job) for job in range(4)] == ["7", "9", "7", "9"]
    slots.give_back(1)
    assert slots.take(4) == "9"
    assert GpuSlots([], 1).take(0) is None and GpuSlots([], 1).capacity == 0


def test_visible_gpus(monkeypatch):
    assert visible_gpus(["0", 1]) == ["0", "1"] and visible_gpus(None) == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert visible_gpus("auto") == ["2", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus("auto") == []


def test_a_sweep_spreads_its_jobs_over_a_fake_device_list(tmp_path):
    """Four jobs on two (fake) GPUs, one job a GPU, n_jobs=4: two at a time, the first two on GPUs
    7 and 9 in turn, each summary naming its job's CUDA_VISIBLE_DEVICES (the old launcher name works)."""
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=4",
                           "hydra.launcher.gpus=[7,9]", *SMALL, "logger=none", "progress=false", "rounds=1",
                           "engine.threads=1", "seed=0,1,2,3", f"hydra.sweep.dir={tmp_path}"],
                          cwd=ROOT, env=ENV, text=True, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "4 jobs, 2 at a time, each in its own process, on GPUs 7,9 (1 a GPU)" in proc.stdout + proc.stderr
    gpus = [json.loads((d / "summary.json").read_text())["cuda_visible_devices"] for d in sorted(tmp_path.glob("[0-9]_*"))]
    assert gpus[:2] == ["7", "9"] and set(gpus) == {"7", "9"}


def test_a_sweep_job_whose_directory_another_live_run_holds_leaves_it_alone(tmp_path):
    """A sweep resubmitted (``resume=auto``) while a run still holds one of its job directories:
    that job is refused with one ``error:`` line and writes no record there (Hydra's ``.hydra``
    files and an empty ``run.log`` come before any callback can refuse)."""
    job_dir = tmp_path / "0"
    job_dir.mkdir()
    (job_dir / run_lock.LOCK).write_text(json.dumps({"pid": os.getpid(), "host": os.uname().nodename,
                                                     "slurm_job_id": None, "started": "now"}))
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "-m", "hydra/launcher=processes", "hydra.launcher.n_jobs=1",
                           *SMALL, "logger=none", "progress=false", "rounds=1", "seed=0", "resume=auto",
                           f"hydra.sweep.dir={tmp_path}", "hydra.sweep.subdir=${hydra.job.num}"],
                          cwd=ROOT, env=ENV, text=True, capture_output=True, timeout=600)
    assert f"error: {job_dir} is in use by another run (process {os.getpid()} on host" in proc.stderr, proc.stderr[-2000:]
    assert {p.name for p in job_dir.iterdir()} <= {".hydra", "run.log", run_lock.LOCK}  # Hydra's, before the claim
    assert run_lock.holder(job_dir)["pid"] == os.getpid() and not (job_dir / "run.log").read_text()


# -- quiet polling ---------------------------------------------------------------------------------
def test_following_a_sweep_logs_one_line_per_change(tmp_path, monkeypatch, caplog):
    """Six polls of two array tasks: a line only where a task's state changed; a task squeue no
    longer lists and that left no result is ``gone``; a task whose result file exists is finished."""
    polls = iter([{"5_0": "PENDING", "5_1": "PENDING"}, {"5_0": "PENDING", "5_1": "PENDING"},
                  {"5_0": "RUNNING", "5_1": "PENDING"}, None, {"5_0": "RUNNING", "5_1": "RUNNING"},
                  {"5_0": "RUNNING"}, {}])
    jobs = [SimpleNamespace(job_id=f"5_{i}", paths=SimpleNamespace(result_pickle=tmp_path / f"{i}.pkl")) for i in (0, 1)]

    def squeue(job_ids):
        states = next(polls)
        if states == {}:
            jobs[0].paths.result_pickle.touch()
        return states

    monkeypatch.setattr(slurm_launcher, "job_states", squeue)
    monkeypatch.setattr(slurm_launcher, "POLL_S", 0.0)
    with caplog.at_level(logging.INFO, logger=slurm_launcher.__name__):
        slurm_launcher.follow(jobs)
    assert [r.getMessage() for r in caplog.records] == [
        "job 5_0: pending", "job 5_1: pending", "job 5_0: running", "job 5_1: running", "job 5_1: gone",
        "job 5_0: finished"]
