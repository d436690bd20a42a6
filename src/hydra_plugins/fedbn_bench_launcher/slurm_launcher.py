"""The SLURM launcher (``hydra/launcher=slurm``): submitit's, with runs that outlive their allocation.

In the job (``__call__``): SLURM's warning before the time limit (``--signal=USR2@<signal_delay_s>``;
SLURM 22.05 did not always send it to a requeued job, so the job also sends it to itself
``signal_delay_s`` before the end time ``squeue`` gives) and its SIGTERM of a preempted, requeued
or cancelled job ask the run to stop after the round under way (``fedbn_bench/stopping.py``);
the run writes a checkpoint of that round and records ``interrupted``. After the warning,
submitit's own handler then requeues the job (or, past ``max_num_timeout`` timeouts, ends it).
A requeued job (``SLURM_RESTART_COUNT`` > 0) runs with ``resume=auto``: it takes its directory
back and continues from its checkpoint, so its records end as an uninterrupted run's.

On the submitting side (``launch``): the sweep's jobs are followed with ``squeue`` (which needs no
accounting database, unlike submitit's ``sacct``), one log line per job whose state changed; a job
that ended without a result (cancelled, killed) is logged and the sweep goes on to its report
(``records/sweep_report.py``), which lists every job's final status.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Optional, Sequence

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from omegaconf import OmegaConf, open_dict

try:
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
except ModuleNotFoundError:  # the optional plugin is absent: no launcher here (``cli.missing_launcher`` refuses
    SlurmLauncher = object   # hydra/launcher=slurm), and Hydra's plugin scan finds this module without an error

from fedbn_bench.errors import Stopped
from fedbn_bench.records.run_lock import SLURM_ENDED
from fedbn_bench.stopping import clear_stop_request, expect_rounds_within, stop_after_round, warned

log = logging.getLogger(__name__)
POLL_S = 5.0
"""Seconds between two looks at the jobs' states."""
ENDED = {*SLURM_ENDED, "SPECIAL_EXIT", "GONE"}
"""Job states after which a job runs no more (``GONE``: no longer listed by ``squeue``; a ``PREEMPTED`` job
may be requeued: it is followed until it is gone)."""
SUBMITTER_KEYS = ("submitit_folder", "max_num_timeout")
"""Launcher keys that configure submitit's executor rather than each job."""


class RequeueingSlurmLauncher(SlurmLauncher):
    """submitit's SLURM launcher whose jobs resume after a requeue (module docstring)."""

    def __call__(self, sweep_overrides: list[str], job_dir_key: str, job_num: int, job_id: str,
                 singleton_state: dict[type, Singleton]) -> JobReturn:
        requeue = signal.getsignal(signal.SIGUSR2)
        clear_stop_request()
        for signum in (signal.SIGUSR2, signal.SIGTERM):
            signal.signal(signum, stop_after_round)
        delay_s = int(self.params.get("signal_delay_s") or 0)
        expect_rounds_within(delay_s)
        warn_before_limit(delay_s)
        try:
            return super().__call__(requeued_overrides(sweep_overrides), job_dir_key, job_num, job_id,
                                    singleton_state)
        except Stopped:
            if warned() and callable(requeue):  # SLURM's SIGTERM at the limit may end a warned job's round
                for signum in (signal.SIGUSR2, signal.SIGTERM):
                    signal.signal(signum, signal.SIG_IGN)  # the limit's SIGTERM must not cut the requeue
                requeue(signal.SIGUSR2, None)  # submitit: requeue, or end the job past max_num_timeout
            raise

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        import submitit
        from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        executor = submitit.AutoExecutor(folder=self.params["submitit_folder"], cluster="slurm",
                                         slurm_max_num_timeout=self.params["max_num_timeout"])
        shared = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(**{key if key in shared else f"slurm_{key}": value
                                      for key, value in self.params.items() if key not in SUBMITTER_KEYS})
        log.info(f"Submitting {len(job_overrides)} jobs to SLURM; sweep output dir: {sweep_dir}")
        numbered = [(initial_job_idx + i, list(o)) for i, o in enumerate(job_overrides)]
        for idx, overrides in numbered:
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
        jobs = executor.map_array(self, *zip(*[(o, "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state())
                                               for idx, o in numbered]))
        follow(jobs)
        return [self._result(job, idx, overrides) for job, (idx, overrides) in zip(jobs, numbered)]

    def _result(self, job: Any, idx: int, overrides: list[str]) -> JobReturn:
        """The job's own result, or, for a job that ended without one, a NaN result naming its directory."""
        if job.paths.result_pickle.exists():
            try:
                return job.results()[0]
            except Exception as err:  # noqa: BLE001 - the job's error, already in its log and summary
                log.error(f"job #{idx} ({job.job_id}) ended with an error: {last_error_line(str(err))}")
        else:
            log.error(f"job #{idx} ({job.job_id}) ended without a result (cancelled or killed; logs: {job.paths.stdout})")
        job_config = self.hydra_context.config_loader.load_sweep_config(self.config, overrides)
        with open_dict(job_config):
            job_config.hydra.job.num = idx
        job_dir = Path(str(job_config.hydra.sweep.dir)) / str(job_config.hydra.sweep.subdir)
        return JobReturn(overrides=overrides, working_dir=str(job_dir), status=JobStatus.COMPLETED,
                         _return_value=float("nan"))


def last_error_line(text: str) -> str:
    """The line of a job's error that names the exception (a traceback's last unindented line)."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith((" ", "-"))]
    return lines[-1] if lines else "no message"


def requeued_overrides(overrides: list[str]) -> list[str]:
    """The job's overrides, with ``resume=auto`` when SLURM requeued it and none says ``resume``."""
    restarted = int(os.environ.get("SLURM_RESTART_COUNT") or 0) > 0
    given = any(o.partition("=")[0].lstrip("+~") == "resume" for o in overrides)
    return [*overrides, "resume=auto"] if restarted and not given else list(overrides)


def warn_before_limit(delay_s: int) -> None:
    """Send this process SLURM's warning (SIGUSR2) ``delay_s`` before its job's end time (nothing
    outside a SLURM job, or when ``squeue`` is missing or does not say)."""
    job_id = os.environ.get("SLURM_JOB_ID")
    try:
        listed = job_id and subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%e"], capture_output=True, text=True)
        end = datetime.fromisoformat(listed.stdout.strip()).timestamp()
    except (AttributeError, ValueError, OSError):  # not in a job, no end time, no squeue on the node
        return
    timer = threading.Timer(max(0.0, end - delay_s - time.time()), os.kill, (os.getpid(), signal.SIGUSR2))
    timer.daemon = True
    timer.start()


def follow(jobs: Sequence[Any]) -> None:
    """Wait for ``jobs`` to end, logging one line per job whose state changed (``squeue`` every ``POLL_S``)."""
    last: dict[str, str] = {}
    while True:
        states = job_states([job.job_id for job in jobs])
        for job in jobs if states is not None else []:
            state = "FINISHED" if job.paths.result_pickle.exists() else states.get(job.job_id, "GONE")
            if last.get(job.job_id) != state:
                log.info(f"job {job.job_id}: {state.lower()}")
                last[job.job_id] = state
        if len(last) == len(jobs) and all(state in ENDED or state == "FINISHED" for state in last.values()):
            return
        time.sleep(POLL_S)


def job_states(job_ids: Sequence[str]) -> Optional[dict[str, str]]:
    """``squeue``'s state of each listed job (array tasks one by one; jobs it no longer lists are
    absent), ``None`` when ``squeue`` did not answer (the controller busy: ask again later)."""
    arrays = sorted({job_id.split("_")[0] for job_id in job_ids})
    listed = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(arrays)],
                            capture_output=True, text=True)
    if listed.returncode != 0:
        return {} if "Invalid job id" in listed.stderr else None
    return dict(line.split("|", 1) for line in listed.stdout.split() if "|" in line)
