"""A local sweep launcher that survives a dead job: each job runs in a process of its own.

``hydra/launcher=processes hydra.launcher.n_jobs=2`` (``config/schema.py``: ``ProcessLauncherConfig``;
``hydra/launcher=joblib`` is the same launcher under its former name) runs the jobs of a sweep
``n_jobs`` at a time (``n_jobs <= 0``: every core but ``-n_jobs - 1``, as joblib reads it), each
in a fresh forked process. joblib's pool fails as a whole when one worker dies (the out-of-memory
killer's SIGKILL ends the sweep with ``TerminatedWorkerError``, the other running job killed with
it); here a job whose process dies is recorded as failed with its cause in its ``summary.json``
(``records/sweep_report.py`` lists it) and the other jobs run on. Ctrl-C or SIGTERM stops the whole
sweep: the running jobs are sent SIGTERM (each records ``interrupted`` with its checkpoint), no new
job starts.

On a node with several GPUs (``gpus``: ``auto`` finds them, or a list of device ids), jobs go to
the GPUs in turn, at most ``jobs_per_gpu`` on one at a time: each job's process sees only its GPU
(``CUDA_VISIBLE_DEVICES``, recorded in its ``summary.json``).
"""
from __future__ import annotations

import csv
import logging
import multiprocessing
import os
import signal
from collections import deque
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Optional, Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

from fedbn_bench.errors import ConfigError, Stopped
from fedbn_bench.records.run_dirs import record_unfinished
from fedbn_bench.records.run_lock import holder

log = logging.getLogger(__name__)
STOPPED = "stopped"
"""What a job's process sends instead of its result when Ctrl-C or SIGTERM stopped it (with the signal's number)."""


class ProcessLauncher(Launcher):
    """Runs a sweep's jobs ``n_jobs`` at a time, each in its own process (module docstring)."""

    def __init__(self, n_jobs: int = -1, gpus: Any = "auto", jobs_per_gpu: int = 1) -> None:
        self.n_jobs = n_jobs
        self.gpus = GpuSlots(visible_gpus(gpus), jobs_per_gpu)
        self.config: Optional[DictConfig] = None
        self.task_function: Optional[TaskFunction] = None
        self.hydra_context: Optional[HydraContext] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        at_once = self.n_jobs if self.n_jobs > 0 else max(1, (os.cpu_count() or 1) + 1 + self.n_jobs)
        at_once = min(at_once, self.gpus.capacity or at_once)
        log.info(f"Launching {len(job_overrides)} jobs, {at_once} at a time, each in its own process"
                 f"{self.gpus.described()}; sweep output dir: {sweep_dir}")
        pending = deque((initial_job_idx + i, list(o)) for i, o in enumerate(job_overrides))
        running: dict[Connection, tuple[int, multiprocessing.Process, DictConfig]] = {}
        results: dict[int, JobReturn] = {}
        try:
            while pending or running:
                while pending and len(running) < at_once:
                    idx, overrides = pending.popleft()
                    log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
                    running.update(self._start(idx, overrides))
                for conn in wait(list(running)):
                    idx, process, job_config = running.pop(conn)
                    self.gpus.give_back(idx)
                    result = _receive(conn)
                    process.join()
                    if isinstance(result, tuple) and result[0] == STOPPED:
                        raise Stopped(result[1], signal.Signals(result[1]).name)
                    results[idx] = result if result is not None else _died(job_config, process)
        except KeyboardInterrupt:
            _stop_all([process for _, process, _ in running.values()])
            raise
        return [results[idx] for idx in sorted(results)]

    def _start(self, idx: int, overrides: list[str]) -> dict[Connection, tuple[int, Any, DictConfig]]:
        """Start job ``idx`` in a forked process; returns its pipe's reading end and what it ran."""
        job_config = self.hydra_context.config_loader.load_sweep_config(self.config, overrides)
        with open_dict(job_config):
            job_config.hydra.job.id = f"{job_config.hydra.job.name}_{idx}"
            job_config.hydra.job.num = idx
        reader, writer = multiprocessing.get_context("fork").Pipe(duplex=False)
        process = multiprocessing.get_context("fork").Process(
            target=_run, args=(writer, job_config, self.hydra_context, self.task_function, self.gpus.take(idx)),
            name=f"job {idx}")
        process.start()
        writer.close()
        return {reader: (idx, process, job_config)}


def _run(writer: Connection, job_config: DictConfig, hydra_context: HydraContext, task_function: TaskFunction,
         gpu: Optional[str]) -> None:
    """The body of a job's process: the job (on ``gpu`` alone when given), its result sent back
    (``(STOPPED, signum)`` when stopped)."""
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    try:
        HydraConfig.instance().set_config(job_config)
        result: Any = run_job(hydra_context=hydra_context, task_function=task_function, config=job_config,
                              job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    except KeyboardInterrupt as err:
        result = (STOPPED, err.signum if isinstance(err, Stopped) else signal.SIGINT)
    try:
        writer.send(result)
    except Exception as err:  # an exception that does not pickle: send its text
        result.return_value = RuntimeError(f"{type(result.return_value).__name__}: {result.return_value} ({err})")
        writer.send(result)
    writer.close()


def visible_gpus(gpus: Any) -> list[str]:
    """The GPUs to spread jobs over: ``gpus`` itself when a list (device ids, e.g. ``[0, 1]``), none
    for ``null`` or ``[]``; ``auto``: those ``CUDA_VISIBLE_DEVICES`` names, else one per
    ``/dev/nvidia<n>`` (found without initializing CUDA in the launcher, which forks its jobs)."""
    if gpus is None or OmegaConf.is_list(gpus) or isinstance(gpus, (list, tuple)):
        return [str(g) for g in gpus or []]
    if str(gpus) != "auto":
        raise ConfigError(f"hydra.launcher.gpus={gpus} is not allowed: auto, null or a list of device ids like [0,1]")
    if (names := os.environ.get("CUDA_VISIBLE_DEVICES")) is not None:
        return [name for name in names.split(",") if name.strip()]
    return sorted((p.name[len("nvidia"):] for p in Path("/dev").glob("nvidia[0-9]*")), key=int)


class GpuSlots:
    """Which GPU each running job has: a new job takes the least busy GPU with a free slot (the
    first such in the list), so jobs go to GPUs in turn."""

    def __init__(self, gpus: list[str], jobs_per_gpu: int) -> None:
        if jobs_per_gpu < 1:
            raise ConfigError(f"hydra.launcher.jobs_per_gpu={jobs_per_gpu} is not allowed: at least 1")
        self.gpus, self.jobs_per_gpu = gpus, jobs_per_gpu
        self.held: dict[int, str] = {}

    @property
    def capacity(self) -> int:
        """Jobs that may run at once on the GPUs (0: no GPUs, no limit)."""
        return len(self.gpus) * self.jobs_per_gpu

    def described(self) -> str:
        return f", on GPUs {','.join(self.gpus)} ({self.jobs_per_gpu} a GPU)" if self.gpus else ""

    def take(self, job: int) -> Optional[str]:
        """The GPU for ``job`` (``None`` without GPUs); the caller starts no more jobs than ``capacity``."""
        if not self.gpus:
            return None
        load = {gpu: list(self.held.values()).count(gpu) for gpu in self.gpus}
        self.held[job] = min(self.gpus, key=lambda gpu: load[gpu])
        return self.held[job]

    def give_back(self, job: int) -> None:
        self.held.pop(job, None)


def _receive(conn: Connection) -> Any:
    """A job's result, ``None`` when its process died before sending one."""
    try:
        return conn.recv()
    except EOFError:
        return None
    finally:
        conn.close()


def _died(job_config: DictConfig, process: multiprocessing.Process) -> JobReturn:
    """Record a job whose process died: a ``failed`` summary in its directory naming the cause and
    the round it died in, and a result that lets the sweep go on (as ``run.py`` returns for a failed
    job). A job refused because another live run holds its directory writes nothing there."""
    job_dir = Path(str(job_config.hydra.sweep.dir)) / str(OmegaConf.select(job_config, "hydra.sweep.subdir"))
    owner = holder(job_dir)
    if not owner or owner.get("pid") == process.pid:
        metrics = job_dir / "metrics.csv"
        rows = list(csv.DictReader(metrics.open())) if metrics.exists() else []
        done = int(rows[-1]["round"]) if rows else 0
        record_unfinished(job_dir, {"status": "failed", "rounds_completed": done, "error_type": "ProcessDied",
                                    "error": _cause(process.exitcode), "error_round": done + 1})
    return JobReturn(overrides=list(job_config.hydra.overrides.task), working_dir=str(job_dir),
                     status=JobStatus.COMPLETED, _return_value=float("nan"))


def _cause(exitcode: Optional[int]) -> str:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        oom = " (the out-of-memory killer sends it)" if -exitcode == signal.SIGKILL else ""
        return f"the job's process was killed by {name}{oom}"
    return f"the job's process exited with status {exitcode} before its result was sent"


def _stop_all(processes: list[Any]) -> None:
    """SIGTERM to each running job (it records ``interrupted``), then wait for them."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join()
