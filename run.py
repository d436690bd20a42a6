"""Run one fedbn-bench experiment (or a sweep with -m): ``python run.py norm=fbn partition=dirichlet alpha=0.1``."""
import logging
import math
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from fedbn_bench.cli import UserError, command_line_error, help_text, register_schemas
from fedbn_bench.engine.run_loop import failure_record
from fedbn_bench.engine.threads import available_cores
from fedbn_bench.records.run_records import RunRecorder, summary_line
from fedbn_bench.records.sweep_labels import label_sweep_run
from fedbn_bench.runner import run_experiment

register_schemas()
CONF = Path(__file__).resolve().parent / "conf"


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    hydra_cfg = HydraConfig.get()
    run_dir = hydra_cfg.runtime.output_dir
    sweep = hydra_cfg.mode == RunMode.MULTIRUN
    if sweep:
        label_sweep_run(cfg, hydra_cfg)
    try:
        summary = run_experiment(cfg, run_dir, jobs_at_once(hydra_cfg))
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        if not sweep:
            sys.exit(2)
        RunRecorder(run_dir).write_summary({"status": "failed", "rounds_completed": 0, **failure_record(err, 0)})
        return math.nan
    except Exception:
        if not sweep:
            raise
        logging.getLogger("fedbn_bench").exception("job %s failed (summary.json says why; the sweep goes on)",
                                                   Path(run_dir).name)
        return math.nan
    for replica in summary.get("replicas", []):
        print(summary_line(replica, replica["run_dir"]))
    print(("mean of the replicas, " if "replicas" in summary else "") + summary_line(summary, run_dir))
    return summary["final_test_acc"] or 0.0


def jobs_at_once(hydra_cfg) -> int:
    """How many runs of this sweep execute at once here: the joblib launcher's ``n_jobs`` (<= 0:
    every core, as joblib reads it), else 1 (a single run, a sequential or cluster sweep)."""
    launcher = hydra_cfg.launcher
    if hydra_cfg.mode != RunMode.MULTIRUN or "joblib" not in str(launcher.get("_target_", "")):
        return 1
    n_jobs = int(launcher.get("n_jobs", 1) or 1)
    return n_jobs if n_jobs > 0 else max(1, available_cores() + 1 + n_jobs)


if __name__ == "__main__":
    if {"--help", "-h"} & set(sys.argv[1:]):
        print(help_text(CONF))
        sys.exit(0)
    if (argv_error := command_line_error(sys.argv[1:], CONF)) is not None:
        print(f"error: {argv_error}", file=sys.stderr)
        sys.exit(2)
    main()
