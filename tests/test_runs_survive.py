"""Runs that survive (issue 43): each test reproduces one way a user lost work before — two runs
in one directory, a killed sweep worker, SIGTERM, a run directory reused silently, a full disk, a
corrupted checkpoint, W&B history lost on resume, exit status 0 for a run that did not complete."""
from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from conftest import ROOT, compose_config
from fedbn_bench.engine import checkpoint as ckpt
from fedbn_bench.engine.round import RoundRunner
from fedbn_bench.errors import ConfigError, Stopped
from fedbn_bench.records import atomic
from fedbn_bench.records.run_dirs import STAGED, RunDirectories, claim
from fedbn_bench.records.run_records import RunRecorder
from fedbn_bench.records.sweep_report import FailedJobsReport
from fedbn_bench.resumption import quote_resume
from fedbn_bench.runner import run_experiment

SMALL = ["model=simple_cnn", "num_clients=4", "batch_size=32", "logger=none", "progress=false"]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
       "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0", "WANDB_MODE": "offline"}


def start(*args: str, cwd: Path = ROOT, preexec_fn=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "run.py"), *args], cwd=cwd, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=preexec_fn)


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=cwd, env=ENV, text=True,
                          capture_output=True, timeout=600)


def wait_for(predicate, proc: subprocess.Popen, what: str, limit: float = 300) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert proc.poll() is None, f"run.py ended before {what}: {proc.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline, f"no {what} after {limit} s"
        time.sleep(0.02)


def checkpoint_round(run_dir: Path) -> int:
    try:
        return torch.load(run_dir / ckpt.FILENAME, weights_only=True)["rounds_completed"]
    except Exception:  # not written yet (or being replaced)
        return 0


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


# -- 1. two runs started in the same second ------------------------------------------------------
def test_two_runs_started_together_get_a_directory_each(tmp_path):
    """Both resolve the same fresh name (a ``${now:...}`` stamp to the year): the second gets ``-2``."""
    runs = [start(*SMALL, "rounds=1", f"seed={seed}", "hydra.run.dir=runs/same_${now:%Y}", cwd=tmp_path)
            for seed in (3, 4)]
    for proc in runs:
        assert proc.wait(timeout=600) == 0, proc.communicate()[1][-2000:]
    dirs = sorted((tmp_path / "runs").iterdir())
    assert [d.name[-2:] for d in dirs] == [time.strftime("%Y")[-2:], "-2"]
    for d in dirs:
        seed = [o for o in (d / ".hydra/overrides.yaml").read_text().split() if o.startswith("seed=")]
        assert seed == [f"seed={torch.load(d / ckpt.FILENAME, weights_only=True)['config']['seed']}"]
        assert len(pd.read_csv(d / "metrics.csv")) == 1


def test_claim_takes_the_next_free_name(tmp_path):
    assert claim(tmp_path / "a") == (tmp_path / "a").absolute()
    assert claim(tmp_path / "a").name == "a-2" and claim(tmp_path / "a").name == "a-3"


def test_a_sweep_whose_stamped_directory_is_taken_writes_its_jobs_under_its_own_suffix(tmp_path):
    """Issue 59: each job recomposes ``hydra.sweep.dir`` from ``${now:...}``, so a sweep that claimed
    ``<stamp>-2`` wrote its jobs into the other sweep's ``<stamp>``."""
    taken = tmp_path / "sweeps" / f"same_{time.strftime('%Y')}"
    (taken / "0_seed=0").mkdir(parents=True)
    done = cli("-m", *SMALL, "rounds=1", "seed=0,1", "hydra.sweep.dir=sweeps/same_${now:%Y}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [p.name for p in taken.iterdir()] == ["0_seed=0"] and not list(taken.rglob("*.*"))
    own = taken.with_name(f"{taken.name}-2")
    assert sorted(p.parent.name[:2] for p in own.glob("*/summary.json")) == ["0_", "1_"]


# -- 2. a sweep worker killed by the out-of-memory killer ----------------------------------------
def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_a_killed_sweep_job_is_listed_and_the_others_finish(tmp_path):
    proc = start("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", *SMALL, "rounds=20", "eval_every=1",
                 "engine.threads=1", "seed=0,1,2", f"hydra.sweep.dir={tmp_path}")
    wait_for(lambda: len(children(proc.pid)) == 2 and list(tmp_path.glob("*/metrics.csv")), proc, "a training job")
    os.kill(children(proc.pid)[0], signal.SIGKILL)
    _, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 1, stderr[-2000:]
    statuses = sorted(summary(d)["status"] for d in tmp_path.glob("[0-9]_*"))
    assert statuses == ["completed", "completed", "failed"]
    assert "1 job(s) did not complete" in stderr and "ProcessDied: the job's process was killed by SIGKILL" in stderr


# -- 3, 7, 8: SIGTERM, then resume with no overrides, W&B under the same id -----------------------
def test_sigterm_records_interrupted_exits_143_and_resume_takes_the_runs_config(tmp_path):
    run_dir, args = tmp_path / "run", [*SMALL[:-2], "progress=false", "rounds=16", "eval_every=2", "lr=0.03"]
    proc = start(*args, f"hydra.run.dir={run_dir}")
    wait_for(lambda: checkpoint_round(run_dir) >= 2, proc, "a checkpoint")
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    stopped = summary(run_dir)
    assert (stopped["status"], stopped["stopped_by"]) == ("interrupted", "SIGTERM")
    assert 2 <= stopped["checkpoint_round"] <= stopped["rounds_completed"] < 16
    run_id = (run_dir / "wandb_id").read_text().strip()
    resumed = cli(f"resume={run_dir}", "progress=false")  # no override retyped
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert summary(run_dir)["status"] == "completed" and summary(run_dir)["rounds_completed"] == 16
    assert (run_dir / "wandb_id").read_text().strip() == run_id
    assert len(list(run_dir.glob(f"wandb/offline-run-*-{run_id}"))) == 1  # one W&B folder across resumes (issue 52)
    assert "lr=0.03" in (run_dir / ".hydra/overrides.yaml").read_text()
    assert pd.read_csv(run_dir / "metrics.csv")["round"].tolist() == list(range(2, 17, 2))
    log = (run_dir / "run.log").read_text()
    assert "round 2: test_acc" in log and "interrupted:" in log and "completed:" in log


def test_resumed_wandb_history_is_whole(tmp_path, monkeypatch):
    """A resumed run logs the rounds before its checkpoint again, under the run's W&B id."""
    common = [*SMALL, "model=fbn_cnn", "rounds=4", "eval_every=1", "checkpoint_every=2"]
    logged = []
    original = RoundRunner.run_round

    def stop_at_3(self, r):
        if r == 3:
            raise KeyboardInterrupt
        return original(self, r)

    with monkeypatch.context() as m:
        m.setattr(RoundRunner, "run_round", stop_at_3)
        run_experiment(compose_config(common), tmp_path)
    monkeypatch.setattr("fedbn_bench.records.loggers.NullLogger.log", lambda self, row, step: logged.append(step))
    run_experiment(compose_config([*common, f"resume={tmp_path}"]), tmp_path)
    assert logged == [1, 2, 3, 4]


# -- 4. a run directory that already holds a run -------------------------------------------------
def start_run(overrides: list[str]):
    cfg = compose_config(overrides, return_hydra_config=True)
    RunDirectories().on_run_start(cfg)
    return cfg


def test_a_fixed_directory_holding_a_run_is_refused_resumed_or_overwritten(tmp_path, capsys):
    RunRecorder(tmp_path).write_summary({"status": "completed", "rounds_completed": 3})
    before = (tmp_path / "summary.json").read_text()
    with pytest.raises(SystemExit) as stop:
        start_run([f"hydra.run.dir={tmp_path}"])
    assert stop.value.code == 2 and "already holds a run; pass resume=auto" in capsys.readouterr().err
    assert (tmp_path / "summary.json").read_text() == before
    cfg = start_run([f"hydra.run.dir={tmp_path}", "resume=auto"])
    assert cfg.hydra.output_subdir is None and (tmp_path / "summary.json").exists()  # its .hydra kept
    cfg = start_run([f"hydra.run.dir={tmp_path}", "overwrite=true"])  # cleared when the new run trains (start_over)
    assert cfg.hydra.output_subdir == STAGED and (tmp_path / "summary.json").read_text() == before
    assert start_run([f"hydra.run.dir={tmp_path / 'new'}"]).hydra.run.dir == str(tmp_path / "new")
    with pytest.raises(SystemExit):
        start_run([f"resume={tmp_path / 'nothing'}"])
    assert not (tmp_path / "nothing").exists()


def test_a_sweep_rerun_with_resume_auto_skips_completed_jobs_and_resumes_the_others(tmp_path):
    args = ["-m", *SMALL, "rounds=4", "eval_every=2", "seed=0,1", f"hydra.sweep.dir={tmp_path}"]
    first = cli(*args)
    assert first.returncode == 0, first.stderr[-2000:]
    done, cut = sorted(tmp_path.glob("[0-9]_*"))
    assert "=" in cut.name and "," in cut.name
    state = torch.load(cut / ckpt.FILENAME, weights_only=True)
    state["rounds_completed"], state["history"] = 2, state["history"][:1]
    state.pop("sha256"), state.pop("format")
    ckpt.save_checkpoint(cut, state)  # as if stopped after round 2 (same weights: only the resume is checked)
    RunRecorder(cut).write_summary({"status": "interrupted", "rounds_completed": 3})
    done_before = (done / "summary.json").read_text()
    refused = cli(*args)
    assert refused.returncode == 2 and "already holds the runs of a sweep" in refused.stderr
    again = cli(*args, "resume=auto")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "left as it is (resume=auto): completed" in again.stdout
    assert (done / "summary.json").read_text() == done_before
    assert summary(cut)["status"] == "completed" and len(pd.read_csv(cut / "metrics.csv")) == 2
    resumed = cli(f"resume={cut}")  # a sweep job's directory, unquoted
    assert resumed.returncode == 0 and "completed:" in resumed.stdout, resumed.stderr[-2000:]


def test_quote_resume_keeps_a_sweep_job_directory_whole():
    assert quote_resume(["resume=m/0_norm=bn,seed=1", "seed=1", "resume='q'"]) == [
        "resume='m/0_norm=bn,seed=1'", "seed=1", "resume='q'"]


# -- nothing left behind, 8: exit statuses ------------------------------------------------------
def test_a_refused_command_leaves_no_directory_and_a_diverged_run_exits_3(tmp_path):
    refused = cli("alpha=0", "logger=none", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.strip().splitlines()[-1].startswith("error: ")
    assert not (tmp_path / "outputs").exists()
    diverged = cli("norm=none", "lr=50", "rounds=5", "algo.clip_grad_norm=null", "logger=none", "progress=false",
                   cwd=tmp_path)
    assert diverged.returncode == 3, diverged.stderr[-2000:]
    assert "diverged" in next((tmp_path / "outputs").glob("*/*/run.log")).read_text()


def test_ctrl_c_stops_the_whole_sweep(tmp_path):
    proc = start("-m", *SMALL, "rounds=200", "eval_every=1", "seed=0,1,2", f"hydra.sweep.dir={tmp_path}")
    wait_for(lambda: list(tmp_path.glob("0_*/metrics.csv")), proc, "the first job's first round")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    assert [d.name[0] for d in tmp_path.glob("[0-9]_*")] == ["0"]
    assert summary(next(tmp_path.glob("0_*")))["status"] == "interrupted"


def test_ctrl_c_stops_a_run_whose_parent_ignored_sigint(tmp_path):
    """A script's background job (``python run.py &``) or a test runner's child starts with SIGINT
    ignored (and may have it blocked), which Python keeps: Ctrl-C would be lost (seen in CI: a
    sweep ran its 3 x 200 rounds to the end after SIGINT)."""
    def ignore_and_block_sigint():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    proc = start(*SMALL, "rounds=200", "eval_every=1", f"hydra.run.dir={tmp_path}",
                 preexec_fn=ignore_and_block_sigint)
    wait_for(lambda: (tmp_path / "metrics.csv").exists(), proc, "the first round")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    assert summary(tmp_path)["status"] == "interrupted"


def test_sigterm_stops_a_parallel_sweep_and_each_running_job_records_it(tmp_path):
    proc = start("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", *SMALL, "rounds=100000", "eval_every=1",
                 "engine.threads=1", "seed=0,1,2", f"hydra.sweep.dir={tmp_path}")
    wait_for(lambda: len(list(tmp_path.glob("*/metrics.csv"))) == 2, proc, "two training jobs")
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    jobs = sorted(tmp_path.glob("[0-9]_*"))
    summaries = {d.name: summary(d) for d in jobs}
    assert len(jobs) == 2 and {s.get("stopped_by") for s in summaries.values()} == {"SIGTERM"}, json.dumps(summaries)


def test_a_signal_during_a_checkpoint_write_stops_the_run_once_the_checkpoint_is_written(tmp_path, monkeypatch):
    """SIGTERM in the middle of torch.save (under load, one job of a stopped sweep in a few: its run read
    ``failed``, 'unexpected pos' from the zip writer): the checkpoint is finished, then the run stops."""
    real_save = torch.save

    def signalled_save(obj, f):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        real_save(obj, f)

    def stop(signum, frame):
        raise Stopped(signum, "SIGTERM")

    monkeypatch.setattr(torch, "save", signalled_save)
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        with pytest.raises(Stopped):
            ckpt.save_checkpoint(tmp_path, {"weights": torch.arange(3.0)})
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert torch.equal(ckpt.load_checkpoint(tmp_path)["weights"], torch.arange(3.0))


def report(sweep_dir: Path) -> None:
    FailedJobsReport().on_multirun_end(SimpleNamespace(hydra=SimpleNamespace(sweep=SimpleNamespace(dir=str(sweep_dir)))))


def test_the_sweep_report_lists_diverged_missing_and_broken_summaries(tmp_path, capsys):
    for name, status in [("0_a", "completed"), ("1_b", "diverged"), ("2_c", None), ("3_d", "broken")]:
        (tmp_path / name / ".hydra").mkdir(parents=True)
        if status == "broken":
            (tmp_path / name / "summary.json").write_text("")
        elif status:
            RunRecorder(tmp_path / name).write_summary({"status": status, "rounds_completed": 2})
    with pytest.raises(SystemExit) as stop:
        report(tmp_path)
    err = capsys.readouterr().err
    assert stop.value.code == 1 and "3 job(s) did not complete" in err
    assert "1_b: diverged after round 2" in err and "2_c: no summary.json" in err
    assert f"3_d: {tmp_path / '3_d' / 'summary.json'} is unreadable" in err


def test_a_run_another_live_process_holds_is_listed_as_running_not_failed(tmp_path, capsys):
    """Two sweeps into one directory (the claims queue runs one cell a process): a completed sweep does not
    fail on the other's run still going; a lock left by a dead process is a failure as before."""
    for name in ("0_done", "1_running", "2_killed"):
        (tmp_path / name / ".hydra").mkdir(parents=True)
    RunRecorder(tmp_path / "0_done").write_summary({"status": "completed", "rounds_completed": 2})
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for name, pid in (("1_running", other.pid), ("2_killed", 2 ** 22 + 17)):
            (tmp_path / name / ".run.lock").write_text(json.dumps({"pid": pid, "host": socket.gethostname()}))
        with pytest.raises(SystemExit):
            report(tmp_path)
        err = capsys.readouterr().err
        assert f"1_running: running in process {other.pid}" in err and "1 job(s) did not complete" in err
        assert "2_killed: no summary.json" in err and "1_running: no summary.json" not in err
        (tmp_path / "2_killed" / ".run.lock").unlink()
        RunRecorder(tmp_path / "2_killed").write_summary({"status": "completed", "rounds_completed": 2})
        report(tmp_path)
        assert "1 job(s) still running in other processes" in capsys.readouterr().err
    finally:
        other.kill()


# -- 5. a full disk ------------------------------------------------------------------------------
def test_a_full_disk_leaves_the_previous_summary_whole(tmp_path, monkeypatch):
    recorder = RunRecorder(tmp_path)
    recorder.write_summary({"status": "running", "rounds_completed": 1})
    recorder.append_metrics({"round": 1, "test_acc": 0.5})

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(OSError):
        recorder.write_summary({"status": "completed", "rounds_completed": 2})
    with pytest.raises(OSError):
        recorder.append_metrics({"round": 2, "test_acc": 0.6})
    assert summary(tmp_path)["status"] == "running"
    assert pd.read_csv(tmp_path / "metrics.csv")["round"].tolist() == [1]
    assert not list(tmp_path.glob(".*.tmp"))


# -- 6. a corrupted checkpoint or changed data ---------------------------------------------------
@pytest.fixture(scope="module")
def checkpointed(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("checkpointed")
    run_experiment(compose_config([*SMALL, "rounds=2", "eval_every=1"]), run_dir)
    return run_dir


def resume(run_dir: Path) -> dict:
    return run_experiment(compose_config([*SMALL, "rounds=2", "eval_every=1", f"resume={run_dir}"]), run_dir)


def corrupt(source: Path, target: Path, change) -> Path:
    target.mkdir()
    raw = bytearray((source / ckpt.FILENAME).read_bytes())
    change(raw)
    (target / ckpt.FILENAME).write_bytes(bytes(raw))
    return target


def test_a_flipped_bit_in_a_checkpoint_is_one_error(checkpointed, tmp_path):
    state = torch.load(checkpointed / ckpt.FILENAME, weights_only=True)
    weights = state["store"]["global_state"]
    key = next(k for k, v in weights.items() if v.dtype == torch.float32 and v.numel() > 100)
    weights[key].view(torch.int32).view(-1)[7] ^= 1  # the lowest bit of one float
    (tmp_path / "flip").mkdir()
    torch.save(state, tmp_path / "flip" / ckpt.FILENAME)
    with pytest.raises(ConfigError, match="is corrupted .* SHA-256"):
        resume(tmp_path / "flip")
    data = bytes(weights[key].view(-1)[:64].numpy().tobytes())

    def flip_in_file(raw: bytearray) -> None:
        raw[raw.find(data) + 29] ^= 1

    with pytest.raises(ConfigError, match="corrupted"):
        resume(corrupt(checkpointed, tmp_path / "raw", flip_in_file))
    with pytest.raises(ConfigError, match="cannot be read .* truncated or corrupted"):
        resume(corrupt(checkpointed, tmp_path / "cut", lambda raw: raw.__delitem__(slice(len(raw) // 2, None))))


def test_resume_on_changed_data_is_one_error(checkpointed, monkeypatch):
    from fedbn_bench import runner

    original = runner.load_dataset

    def noisy(*args, **kwargs):
        data = original(*args, **kwargs)
        data.train.x[0, 0] += 0.5
        return data

    monkeypatch.setattr(runner, "load_dataset", noisy)
    with pytest.raises(ConfigError, match="the dataset differs"):
        resume(checkpointed)
