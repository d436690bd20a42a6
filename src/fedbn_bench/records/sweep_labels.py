"""How a sweep's runs are labelled in W&B: grouped by the sweep's directory and tagged with the
values the sweep varies (``norm=fbn``), so runs of one sweep neither collide nor scatter.

The swept keys are those the sweep was started with as sweeps (``norm=bn,fbn``, ``seed=range(3)``,
read from ``<sweep dir>/multirun.yaml``, which Hydra writes before the first job) and those of a
preset's ``hydra.sweeper.params``; each job's value of them comes from its own overrides.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf, open_dict


def swept_keys(hydra_cfg: Any) -> set[str]:
    """The keys this job's sweep varies."""
    params = hydra_cfg.sweeper.get("params")
    keys = set(params.keys()) if params else set()
    started = Path(hydra_cfg.sweep.dir) / "multirun.yaml"
    if started.is_file():
        overrides = OmegaConf.load(started).hydra.overrides.task
        keys |= {o.key_or_group for o in OverridesParser.create().parse_overrides(list(overrides))
                 if o.is_sweep_override()}
    return keys


def sweep_tags(hydra_cfg: Any) -> list[str]:
    """``key=value`` for each swept key of this job, in the job's override order."""
    keys = swept_keys(hydra_cfg)
    return [o for o in hydra_cfg.overrides.task if o.split("=", 1)[0].lstrip("+~") in keys]


def label_sweep_run(cfg: DictConfig, hydra_cfg: Any) -> None:
    """Group this sweep job by its sweep directory (unless ``logger.group`` is set) and add its
    swept values to ``logger.tags`` (the runner puts them in the run's name too)."""
    with open_dict(cfg):
        if cfg.logger.group is None:
            cfg.logger.group = str(hydra_cfg.sweep.dir)
        cfg.logger.tags = [*cfg.logger.tags, *(t for t in sweep_tags(hydra_cfg) if t not in cfg.logger.tags)]
