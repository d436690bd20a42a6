"""Run one fedbn-bench experiment (or a sweep with -m): ``python run.py norm=fbn partition=dirichlet alpha=0.1``."""
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from fedbn_bench.cli import UserError, register_schemas
from fedbn_bench.records.run_records import summary_line
from fedbn_bench.runner import run_experiment

register_schemas()


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    run_dir = HydraConfig.get().runtime.output_dir
    try:
        summary = run_experiment(cfg, run_dir)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    print(summary_line(summary, run_dir))
    return summary["final_test_acc"] or 0.0


if __name__ == "__main__":
    main()
