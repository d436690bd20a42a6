"""Run one fedbn-bench experiment (or a sweep with -m): ``python run.py norm=fbn partition=dirichlet alpha=0.1``.

Exit status: 0 completed, 1 failed, 2 refused (bad input, one ``error:`` line), 3 diverged,
128 + signal number when stopped (130 Ctrl-C, 143 SIGTERM); a sweep exits 1 when any job did not
complete (``records/sweep_report.py``) and stops entirely on Ctrl-C or SIGTERM (docs/runs.md).
"""
import errno
import logging
import math
import signal
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from fedbn_bench.cli import UserError, command_line_error, help_text, register_schemas
from fedbn_bench.engine.threads import available_cores
from fedbn_bench.errors import Stopped
from fedbn_bench.records.run_dirs import discard_if_created_here
from fedbn_bench.records.run_lock import release
from fedbn_bench.records.run_records import summary_line
from fedbn_bench.records.sweep_labels import label_sweep_run
from fedbn_bench.records.sweep_report import FAILED_ATTEMPT
from fedbn_bench.resumption import ended_summary, quote_resume, resumed_config
from fedbn_bench.runner import record_failure_before_rounds, run_experiment

register_schemas()
CONF = Path(__file__).resolve().parent / "conf"
log = logging.getLogger("fedbn_bench")
EXIT_STATUS = {"completed": 0, "failed": 1, "diverged": 3}
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    """Run the experiment of ``cfg`` in its directory, then give the directory up (``records/run_lock.py``)."""
    run_dir = HydraConfig.get().runtime.output_dir
    try:
        return run_in(cfg, run_dir)
    finally:
        release(run_dir)


def run_in(cfg: DictConfig, run_dir: str) -> float:
    """The run (or sweep job) of ``cfg`` in ``run_dir``: its summary's final accuracy, exit status on its own."""
    hydra_cfg = HydraConfig.get()
    sweep = hydra_cfg.mode == RunMode.MULTIRUN
    if sweep:
        label_sweep_run(cfg, hydra_cfg)
    Path(run_dir, FAILED_ATTEMPT).unlink(missing_ok=True)
    try:
        if (ended := ended_summary(run_dir) if cfg.resume == "auto" else None) is not None:
            log.info("left as it is (resume=auto): " + summary_line(ended, run_dir))
            return ended["final_test_acc"] or 0.0
        cfg = resumed_config(cfg, run_dir, list(hydra_cfg.overrides.task))
        summary = run_experiment(cfg, run_dir, jobs_at_once(hydra_cfg))
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        if not sweep:
            discard_if_created_here(run_dir)
            sys.exit(2)
        record_failure_before_rounds(run_dir, err)
        return math.nan
    except OSError as err:
        if err.errno not in NO_SPACE:
            raise
        print(f"error: {err.strerror} while writing {err.filename or 'the records'} (the run stopped; free space "
              f"and resume it: python run.py resume={run_dir})", file=sys.stderr)
        if not sweep:
            sys.exit(1)
        return math.nan
    except Exception:
        if not sweep:
            raise
        log.exception("job %s failed (summary.json says why; the sweep goes on)", Path(run_dir).name)
        return math.nan
    for replica in summary.get("replicas", []):
        log.info(summary_line(replica, replica["run_dir"]))
    log.info(("mean of the replicas, " if "replicas" in summary else "") + summary_line(summary, run_dir))
    if summary["status"] == "interrupted":
        log.info(f"resume it: python run.py resume={run_dir}")
        name = summary.get("stopped_by", "SIGINT")
        raise Stopped(getattr(signal, name, signal.SIGINT), name)  # stops a sweep, too
    if not sweep and summary["status"] != "completed":
        sys.exit(EXIT_STATUS[summary["status"]])
    return summary["final_test_acc"] or 0.0


def jobs_at_once(hydra_cfg) -> int:
    """How many runs of this sweep execute at once here: the local launcher's ``n_jobs`` (<= 0:
    every core, as joblib reads it), else 1 (a single run, a sequential or cluster sweep)."""
    launcher = hydra_cfg.launcher
    if hydra_cfg.mode != RunMode.MULTIRUN or "n_jobs" not in launcher:
        return 1
    n_jobs = int(launcher.get("n_jobs", 1) or 1)
    return n_jobs if n_jobs > 0 else max(1, available_cores() + 1 + n_jobs)


def stop(signum: int, frame) -> None:
    """SIGTERM (SLURM's preemption and time limit, ``timeout``, ``docker stop``) stops a run as Ctrl-C does."""
    raise Stopped(signum, signal.Signals(signum).name)


if __name__ == "__main__":
    if {"--help", "-h"} & set(sys.argv[1:]):
        print(help_text(CONF))
        sys.exit(0)
    sys.argv = [sys.argv[0], *quote_resume(sys.argv[1:])]
    if (argv_error := command_line_error(sys.argv[1:], CONF)) is not None:
        print(f"error: {argv_error}", file=sys.stderr)
        sys.exit(2)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when the parent ignored it (`run.py &` in a script)
    signal.signal(signal.SIGTERM, stop)
    try:
        main()
    except KeyboardInterrupt as err:
        signum = err.signum if isinstance(err, Stopped) else signal.SIGINT
        print(f"stopped by {signal.Signals(signum).name}", file=sys.stderr)
        sys.exit(128 + signum)
