"""Run one fedbn-bench experiment (or a sweep with -m): ``python run.py norm=fbn partition=dirichlet alpha=0.1``."""
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from fedbn_bench.cli import UserError, register_schemas
from fedbn_bench.runner import run_experiment

register_schemas()


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    try:
        summary = run_experiment(cfg, HydraConfig.get().runtime.output_dir)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    return summary["final_test_acc"] or 0.0


if __name__ == "__main__":
    main()
