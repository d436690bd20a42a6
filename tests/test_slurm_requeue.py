"""The SLURM launcher's requeue paths without a cluster (issue 59), with real signals sent to this process:
a warned job is requeued whichever signal stops it, the self-sent warning comes ``signal_delay_s`` before the
end time, a missing ``squeue`` is no crash, a preempted job is still followed, a round longer than
``signal_delay_s`` is named, a stale lock of an ended SLURM job is taken over. On a real cluster:
``tests/test_slurm_cluster.py`` (slow)."""
from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from conftest import compose_config
from fedbn_bench import stopping
from fedbn_bench.engine import checkpoint as ckpt
from fedbn_bench.engine.round import RoundRunner
from fedbn_bench.errors import Stopped
from fedbn_bench.records import run_lock
from fedbn_bench.records.sweep_report import job_lines
from fedbn_bench.runner import run_experiment
from fedbn_bench.stopping import clear_stop_request
from hydra_plugins.fedbn_bench_launcher import slurm_launcher
from hydra_plugins.fedbn_bench_launcher.slurm_launcher import RequeueingSlurmLauncher

pytest.importorskip("hydra_plugins.hydra_submitit_launcher")


@pytest.fixture(autouse=True)
def own_handlers():
    """Each test starts with no stop request and leaves the signal handlers as it found them."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGUSR2, signal.SIGTERM)}
    clear_stop_request()
    yield
    clear_stop_request()
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def fake_command(tmp_path: Path, monkeypatch, name: str, script: str) -> None:
    """Put an executable ``name`` running ``script`` (sh) first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / name).write_text(f"#!/bin/sh\n{script}\n")
    (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def launched_job(monkeypatch, *signums: int) -> list[int]:
    """Run ``RequeueingSlurmLauncher.__call__`` on a job that receives ``signums`` (in order, real signals) and
    then stops as the run loop does; returns the signals submitit's requeue handler was called with."""
    requeued: list[int] = []
    signal.signal(signal.SIGUSR2, lambda signum, frame: requeued.append(signum))  # submitit's, in a real job

    def job(self, *args):
        for signum in signums:
            os.kill(os.getpid(), signum)
        raise stopping.requested_stop()

    monkeypatch.setattr(slurm_launcher.SlurmLauncher, "__call__", job)
    launcher = object.__new__(RequeueingSlurmLauncher)
    launcher.params = {"signal_delay_s": 0}
    with pytest.raises(Stopped):
        launcher([], "hydra.sweep.dir", 0, "job", {})
    return requeued


@pytest.mark.parametrize("signums, requeued", [
    ((signal.SIGUSR2,), [signal.SIGUSR2]),
    ((signal.SIGUSR2, signal.SIGTERM), [signal.SIGUSR2]),
    ((signal.SIGTERM,), []),
])
def test_a_warned_job_is_requeued_whichever_signal_stops_it(monkeypatch, signums, requeued):
    """Warned (SIGUSR2), then SLURM's SIGTERM at the limit during a round longer than ``signal_delay_s`` (or while
    the stop checkpoint is written): it ended as SIGTERM, not requeued. SIGTERM alone (preemption: SLURM requeues;
    ``scancel``) asks for no requeue."""
    assert launched_job(monkeypatch, *signums) == requeued


def test_the_job_warns_itself_signal_delay_s_before_its_end_time(tmp_path, monkeypatch):
    end = datetime.fromtimestamp(time.time() + 100).replace(microsecond=0)
    fake_command(tmp_path, monkeypatch, "squeue", f"echo {end.isoformat()}")
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    timers = []
    monkeypatch.setattr(threading.Timer, "start", lambda timer: timers.append(timer))
    slurm_launcher.warn_before_limit(30)
    [timer] = timers
    assert timer.interval == pytest.approx(end.timestamp() - 30 - time.time(), abs=2)
    assert (timer.function, timer.args) == (os.kill, (os.getpid(), signal.SIGUSR2))


def test_a_job_without_squeue_runs_on(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("PATH", str(tmp_path))
    slurm_launcher.warn_before_limit(30)  # raised FileNotFoundError: the job crashed


def test_a_preempted_job_is_followed_until_it_ends(tmp_path, monkeypatch, caplog):
    polls = iter([{"5_0": "RUNNING"}, {"5_0": "PREEMPTED"}, {"5_0": "PENDING"}, {"5_0": "RUNNING"}, {}])
    job = SimpleNamespace(job_id="5_0", paths=SimpleNamespace(result_pickle=tmp_path / "0.pkl"))

    def squeue(job_ids):
        states = next(polls)
        if states == {}:
            job.paths.result_pickle.touch()
        return states

    monkeypatch.setattr(slurm_launcher, "job_states", squeue)
    monkeypatch.setattr(slurm_launcher, "POLL_S", 0.0)
    with caplog.at_level(logging.INFO, logger=slurm_launcher.__name__):
        slurm_launcher.follow([job])
    assert [r.getMessage() for r in caplog.records] == [
        "job 5_0: running", "job 5_0: preempted", "job 5_0: pending", "job 5_0: running", "job 5_0: finished"]


def test_a_round_longer_than_signal_delay_s_is_named_once(caplog):
    stopping.expect_rounds_within(30)
    with caplog.at_level(logging.WARNING, logger=stopping.__name__):
        for seconds in (29.0, 31.5, 40.0):
            stopping.round_took(seconds)
    assert [r.getMessage() for r in caplog.records] == [
        "a round took 31.5 s, longer than hydra.launcher.signal_delay_s=30: SLURM's time limit will abandon the "
        "round under way (the job resumes from its last checkpoint); raise signal_delay_s above a round's time"]


def locked_by_a_slurm_job(run_dir: Path) -> None:
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / run_lock.LOCK).write_text(json.dumps({"pid": 1, "host": "othernode", "slurm_job_id": "77_1",
                                                     "started": "then"}))


@pytest.mark.parametrize("squeue, alive", [("exit 0", False), ("echo 'slurm_load_jobs error: Invalid job id "
                                                                   "specified' >&2; exit 1", False),
                                           ("echo RUNNING", True), ("echo PENDING", True), (None, True)])
def test_the_lock_of_a_slurm_job_that_ended_on_another_node_is_stale(tmp_path, monkeypatch, capsys, squeue, alive):
    """SIGKILLed on another node: the submit host cannot check its process; the sweep listed it "still running",
    exited 0, and its resubmission with ``resume=auto`` was refused until the lock was removed by hand."""
    if squeue is None:
        monkeypatch.setenv("PATH", str(tmp_path))  # no squeue here: nothing says it ended
    else:
        fake_command(tmp_path, monkeypatch, "squeue", squeue)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    job = tmp_path / "sweep" / "0_seed=0"
    locked_by_a_slurm_job(job)
    completed, running, unfinished = job_lines(tmp_path / "sweep")
    assert (len(running), len(unfinished)) == ((1, 0) if alive else (0, 1))
    if alive:
        with pytest.raises(run_lock.DirectoryInUse):
            run_lock.acquire(job)
        return
    run_lock.acquire(job)
    assert run_lock.holder(job)["pid"] == os.getpid()
    assert "a stale lock: SLURM job 77_1 is no longer running" in capsys.readouterr().err


SMALL = ["model=simple_cnn", "num_clients=4", "batch_size=32", "dataset=sklearn_digits", "eval_every=1"]


def saving_with(monkeypatch, signum: int, at_round: int) -> None:
    """``torch.save`` of the checkpoint of round ``at_round`` receives ``signum`` (a real signal) as it starts."""
    real_save = torch.save

    def save(obj, f):
        if isinstance(obj, dict) and obj.get("rounds_completed") == at_round:
            os.kill(os.getpid(), signum)
            time.sleep(0.05)
        real_save(obj, f)

    monkeypatch.setattr(torch, "save", save)


def in_a_slurm_job() -> None:
    for signum in (signal.SIGUSR2, signal.SIGTERM):
        signal.signal(signum, stopping.stop_after_round)


def test_the_warning_during_the_stop_checkpoint_after_a_sigterm_leaves_that_checkpoint(tmp_path, monkeypatch):
    """Preempted (SIGTERM recorded), then the warning while the stop checkpoint is written: SIGUSR2 was not deferred,
    so it cut ``torch.save`` (the run read ``failed``, "unexpected pos") and no checkpoint of that round was left."""
    in_a_slurm_job()
    saving_with(monkeypatch, signal.SIGUSR2, at_round=1)
    stopping.stop_after_round(signal.SIGTERM)
    done = run_experiment(compose_config([*SMALL, "rounds=4", "checkpoint_every=3"]), tmp_path)
    assert (done["status"], done["rounds_completed"], done["checkpoint_round"]) == ("interrupted", 1, 1)
    assert done["stopped_by"] == "SIGUSR2"
    assert torch.load(tmp_path / ckpt.FILENAME, weights_only=True)["rounds_completed"] == 1


def test_a_stop_during_a_checkpoint_write_leaves_checkpoint_round_naming_it(tmp_path, monkeypatch):
    """The deferred signal fired inside ``save_checkpoint``, before ``checkpoint_round`` was set: the summary named
    the checkpoint before the one on disk."""
    def stop(signum, frame):
        raise Stopped(signum, "SIGTERM")

    signal.signal(signal.SIGTERM, stop)
    saving_with(monkeypatch, signal.SIGTERM, at_round=2)
    done = run_experiment(compose_config([*SMALL, "rounds=4", "checkpoint_every=1"]), tmp_path)
    assert (done["status"], done["rounds_completed"], done["checkpoint_round"]) == ("interrupted", 2, 2)
    assert torch.load(tmp_path / ckpt.FILENAME, weights_only=True)["rounds_completed"] == 2


def test_a_warned_run_with_checkpoint_every_0_checkpoints_its_stop(tmp_path, monkeypatch):
    """``checkpoint_every=0`` (scripts/gpu_check.sh's sweep) restarted every requeue at round 0."""
    in_a_slurm_job()
    original = RoundRunner.run_round

    def warned_in_round_2(self, r):
        if r == 1:
            os.kill(os.getpid(), signal.SIGUSR2)
        return original(self, r)

    monkeypatch.setattr(RoundRunner, "run_round", warned_in_round_2)
    done = run_experiment(compose_config([*SMALL, "rounds=4", "checkpoint_every=0"]), tmp_path)
    assert (done["status"], done["rounds_completed"], done["checkpoint_round"]) == ("interrupted", 2, 2)
    assert torch.load(tmp_path / ckpt.FILENAME, weights_only=True)["rounds_completed"] == 2


def test_a_live_process_of_this_host_holds_its_lock_whatever_squeue_says(tmp_path, monkeypatch):
    """The process is the authority on its own host: a lock naming a SLURM job that ``squeue`` does not list
    (another cluster's, a job id reused) stays held while its process lives."""
    fake_command(tmp_path, monkeypatch, "squeue", "exit 0")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    (tmp_path / run_lock.LOCK).write_text(json.dumps({"pid": os.getppid(), "host": os.uname().nodename,
                                                      "slurm_job_id": "41_2", "started": "then"}))
    with pytest.raises(run_lock.DirectoryInUse):
        run_lock.acquire(tmp_path)
