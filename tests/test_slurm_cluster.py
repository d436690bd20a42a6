"""Sweeps on a real single-node SLURM cluster (issue 50), started by ``scripts/slurm_local.sh``
(root, Debian's slurm-wlm and munge; the tests skip, naming why, where it cannot start): a run
longer than its time limit is requeued and ends with the records of a local run, as does a run
preempted by ``scontrol requeue``; a 4-job sweep completes and its resubmission with ``resume=auto``
leaves it as it is; a ``scancel``led job records ``interrupted`` and the sweep reports it."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from conftest import ROOT
from fedbn_bench.engine import checkpoint as ckpt

pytestmark = pytest.mark.slow
SCRIPT = ROOT / "scripts" / "slurm_local.sh"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
       "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0", "WANDB_MODE": "offline"}
ON_SLURM = ["hydra/launcher=slurm", "hydra.launcher.partition=debug", "hydra.launcher.gpus_per_node=0",
            "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1"]
RUN = ["eval_every=5", "engine.threads=1", "progress=false"]


@pytest.fixture(scope="module")
def cluster() -> None:
    """The local cluster, started if it is not up; left running (parallel test workers share it:
    ``scripts/slurm_local.sh stop`` ends it)."""
    started = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, timeout=120)
    if started.returncode == 3:
        pytest.skip(started.stderr.strip())
    assert started.returncode == 0, started.stdout + started.stderr


def sweep(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "run.py"), "-m", *ON_SLURM, *args], cwd=ROOT, env=ENV,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def finish(proc: subprocess.Popen, limit: float = 900) -> str:
    out, _ = proc.communicate(timeout=limit)
    return out


def only_job(sweep_dir: Path) -> Path:
    [job] = [d for d in sweep_dir.iterdir() if d.name[0].isdigit()]
    return job


def wait_for_checkpoint(proc: subprocess.Popen, sweep_dir: Path, at_least: int, limit: float = 300) -> Path:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        jobs = list(sweep_dir.glob("[0-9]*/checkpoint.pt"))
        try:
            if jobs and torch.load(jobs[0], weights_only=True)["rounds_completed"] >= at_least:
                return jobs[0].parent
        except Exception:  # being replaced
            pass
        time.sleep(1)
    raise AssertionError(f"no checkpoint of round {at_least} after {limit} s")


def slurm_job_id(sweep_dir: Path) -> str:
    """The SLURM job of the sweep last submitted in ``sweep_dir``."""
    return max((d.name for d in (sweep_dir / ".submitit").iterdir() if d.is_dir()), key=lambda n: int(n.split("_")[0]))


def assert_equals_a_local_run(job_dir: Path, overrides: list[str], tmp_path: Path) -> None:
    """The job's metrics.csv (each round once) and final state equal a local run's of its overrides."""
    local = tmp_path / "local"
    done = subprocess.run([sys.executable, str(ROOT / "run.py"), *overrides, f"hydra.run.dir={local}"], cwd=ROOT,
                          env=ENV, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [pd.read_csv(d / "metrics.csv").drop(columns="wall_s") for d in (job_dir, local)]
    assert rows[0]["round"].is_unique
    pd.testing.assert_frame_equal(*rows)
    states = [torch.load(d / ckpt.FILENAME, weights_only=True)["store"]["global_state"] for d in (job_dir, local)]
    assert states[0].keys() == states[1].keys()
    assert all(torch.equal(states[0][k].double(), states[1][k].double()) for k in states[0])


def test_a_run_longer_than_its_time_limit_is_requeued_and_ends_as_a_local_run(cluster, tmp_path):
    """100 rounds (about 1 s each here) under a 2-minute limit, warned 30 s before it: the job is
    requeued at least once, each attempt continuing from the round its predecessor finished, under
    one W&B run id. (A 1-minute limit is too short for SLURM's warning: it arrives up to 60 s early,
    before the job's Python has started.)"""
    sweep_dir = tmp_path / "sweep"
    overrides = [*RUN, "rounds=100", "logger=wandb"]
    out = finish(sweep("hydra.launcher.timeout_min=2", "hydra.launcher.signal_delay_s=30", *overrides,
                       f"hydra.sweep.dir={sweep_dir}"))
    job = only_job(sweep_dir)
    assert json.loads((job / "summary.json").read_text())["status"] == "completed", out[-3000:]
    log = (job / "run.log").read_text()
    attempts = log.count("interrupted:") + 1
    assert attempts >= 2, log
    assert "stopped_by" not in json.loads((job / "summary.json").read_text())
    run_id = (job / "wandb_id").read_text().strip()
    assert len(list(job.glob(f"wandb/offline-run-*-{run_id}"))) == attempts
    assert "1 job(s) completed" in out and "completed, 100 rounds" in out
    assert_equals_a_local_run(job, [*overrides, "logger=none"], tmp_path)


def test_a_preempted_job_resumes_and_ends_as_a_local_run(cluster, tmp_path):
    sweep_dir = tmp_path / "sweep"
    overrides = [*RUN, "rounds=40", "logger=none"]
    proc = sweep(*overrides, f"hydra.sweep.dir={sweep_dir}")
    job = wait_for_checkpoint(proc, sweep_dir, 10)
    subprocess.run(["scontrol", "requeue", slurm_job_id(sweep_dir)], check=True)
    out = finish(proc)
    assert proc.returncode == 0, out[-3000:]
    log = (job / "run.log").read_text()
    assert "interrupted:" in log and "completed:" in log
    assert_equals_a_local_run(job, overrides, tmp_path)


def test_a_four_job_sweep_completes_and_its_resubmission_leaves_it(cluster, tmp_path):
    args = [*RUN, "rounds=3", "logger=none", "norm=bn,gn", "seed=0,1", f"hydra.sweep.dir={tmp_path}"]
    first = sweep(*args)
    out = finish(first)
    assert first.returncode == 0, out[-3000:]
    assert f"4 job(s) completed in {tmp_path}:" in out and out.count("completed, 3 rounds") == 4
    again = sweep(*args, "resume=auto")
    out = finish(again)
    assert again.returncode == 0, out[-3000:]
    assert all("left as it is (resume=auto)" in (d / "run.log").read_text() for d in tmp_path.glob("[0-9]_*"))


def test_a_cancelled_job_records_interrupted_and_the_sweep_reports_it(cluster, tmp_path):
    proc = sweep(*RUN, "rounds=100000", "logger=none", f"hydra.sweep.dir={tmp_path}")
    job = wait_for_checkpoint(proc, tmp_path, 5)
    subprocess.run(["scancel", slurm_job_id(tmp_path)], check=True)
    out = finish(proc)
    assert proc.returncode == 1, out[-3000:]
    summary = json.loads((job / "summary.json").read_text())
    assert (summary["status"], summary["stopped_by"]) == ("interrupted", "SIGTERM")
    assert summary["checkpoint_round"] == summary["rounds_completed"] >= 5
    assert f"{job.name}: interrupted by SIGTERM after round {summary['rounds_completed']}" in out


def job_log(job: Path) -> str:
    return (job / "run.log").read_text() if (job / "run.log").exists() else ""


def wait_for_log(proc: subprocess.Popen, job: Path, text: str, count: int = 1, limit: float = 300) -> None:
    deadline = time.monotonic() + limit
    while job_log(job).count(text) < count:
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        assert time.monotonic() < deadline, f"{text!r} not {count} times in run.log after {limit} s"
        time.sleep(0.2)


def warn_and_cut(sweep_dir: Path) -> None:
    """SLURM's warning, then its SIGTERM at the limit while the round is still under way (issue 59: the round
    outlasting ``signal_delay_s``), both to the job's steps as SLURM sends them."""
    job_id = slurm_job_id(sweep_dir)
    subprocess.run(["scancel", "--signal=USR2", job_id], check=True)
    subprocess.run(["scancel", "--signal=TERM", job_id], check=True)


def test_a_warned_job_whose_round_the_limit_cuts_is_requeued_and_ends_as_a_local_run(cluster, tmp_path):
    """Issue 59: a warned job stopped by SIGTERM (its round outlasting ``signal_delay_s``) ended ``interrupted``,
    not requeued."""
    sweep_dir = tmp_path / "sweep"
    overrides = [*RUN, "rounds=40", "logger=none"]
    proc = sweep(*overrides, f"hydra.sweep.dir={sweep_dir}")
    job = wait_for_checkpoint(proc, sweep_dir, 10)
    warn_and_cut(sweep_dir)
    out = finish(proc)
    assert proc.returncode == 0, out[-3000:]
    log = job_log(job)
    assert "interrupted:" in log and "resumed" in log and "completed:" in log, log
    assert_equals_a_local_run(job, overrides, tmp_path)


def resumed_after(log: str) -> list[int]:
    """The rounds each resumption of the run in ``log`` continued after."""
    return [int(m) for m in re.findall(r"resumed .* after round (\d+) \(its checkpoint\)", log)]


def test_an_overwrite_sweep_requeued_twice_ends_as_a_local_run(cluster, tmp_path):
    """Issue 59: ``overwrite=true`` stays on the requeued job's command line; ``start_over`` deleted the checkpoint
    it had just loaded, so a second stop before the next checkpoint (here a warned round cut by SIGTERM)
    restarted at round 0. Preempted once (``scontrol requeue``), then warned and cut."""
    sweep_dir, one_job = tmp_path / "sweep", "hydra.sweep.subdir=0_job"
    first = finish(sweep(*RUN, "rounds=2", "logger=none", f"hydra.sweep.dir={sweep_dir}", one_job))
    assert "1 job(s) completed" in first, first[-3000:]
    overrides = [*RUN, "rounds=60", "logger=none"]
    proc = sweep(*overrides, "checkpoint_every=30", "overwrite=true", f"hydra.sweep.dir={sweep_dir}", one_job)
    job = sweep_dir / "0_job"
    wait_for_log(proc, job, "round 10: test_acc")
    subprocess.run(["scontrol", "requeue", slurm_job_id(sweep_dir)], check=True)
    wait_for_log(proc, job, "resumed")
    warn_and_cut(sweep_dir)
    wait_for_log(proc, job, "resumed", count=2)
    out = finish(proc)
    assert proc.returncode == 0, out[-3000:]
    after = resumed_after(job_log(job))
    assert len(after) == 2 and 10 <= after[0] == after[1] < 30, job_log(job)
    assert not (job / ".overwritten").exists() and not (job / ".hydra-overwrite").exists()
    assert_equals_a_local_run(job, overrides, tmp_path)


def test_a_job_killed_on_another_node_is_reported_and_its_resubmission_takes_its_lock(cluster, tmp_path):
    """Issue 59: SIGKILL leaves the job's lock; from another node the submit host cannot check its process: the
    sweep listed it "still running" and exited 0, and ``resume=auto`` was refused until the lock was removed."""
    args = [*RUN, "rounds=40", "logger=none", f"hydra.sweep.dir={tmp_path}"]
    proc = sweep(*args)
    job = wait_for_checkpoint(proc, tmp_path, 5)
    lock = job / ".run.lock"
    lock.write_text(json.dumps({**json.loads(lock.read_text()), "host": "othernode"}))
    subprocess.run(["scancel", "--signal=KILL", slurm_job_id(tmp_path)], check=True)
    out = finish(proc)
    assert proc.returncode == 1, out[-3000:]
    assert "still running" not in out and "1 job(s) did not complete" in out, out[-3000:]
    again = sweep(*args, "resume=auto")
    out = finish(again)
    assert again.returncode == 0, out[-3000:]
    assert "completed, 40 rounds" in out, out[-3000:]
    notes = "".join(p.read_text() for p in (tmp_path / ".submitit").rglob("*.err"))
    assert "a stale lock: SLURM job" in notes and "is no longer running" in notes, notes[-3000:]


def test_the_local_cluster_starts_again_while_it_is_up(cluster):
    """The daemons inherited ``start.lock``'s descriptor: a second ``start`` (the next test session) waited forever."""
    again = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, timeout=30)
    assert again.returncode == 0 and again.stdout.startswith("already running"), again.stdout + again.stderr
