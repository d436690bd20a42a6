"""Shared fixtures: Hydra composition of the project's config without the command line."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from fedbn_bench.config.schema import register_schemas
from fedbn_bench.engine.settings import RunSettings
from fedbn_bench.engine.simulation import Simulation
from fedbn_bench.records.loggers import NullLogger
from fedbn_bench.records.run_records import RunRecorder
from fedbn_bench.runner import build_federation

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"

register_schemas()


def compose_config(overrides: list[str] | None = None):
    """The composed config for ``overrides`` (``logger=none`` and no progress bar by default)."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=["logger=none", "progress=false", *(overrides or [])])


def build_simulation(overrides: list[str], run_dir: Path, rounds: int = 2, dtype: torch.dtype = torch.float64,
                     engine: str = "loop", simulation: type[Simulation] = Simulation, **options) -> Simulation:
    """A CPU simulation of ``overrides`` with its model and data in ``dtype``, evaluating every
    round (nothing run yet); ``options`` go to ``RunSettings``."""
    cfg = compose_config(overrides)
    torch.manual_seed(cfg.seed)
    fed, _ = build_federation(cfg, torch.device("cpu"))
    fed.model.to(dtype)
    for split in (fed.data.train, fed.data.test):
        split.x = split.x.to(dtype)
    settings = RunSettings(rounds=rounds, clients_per_round=cfg.clients_per_round, batch_size=cfg.batch_size,
                           lr=cfg.algo.lr, schedule=cfg.algo.schedule, seed=cfg.seed, eval_every=1,
                           augment=cfg.dataset.augment, progress=False, **options)
    return simulation(fed, settings, RunRecorder(run_dir), NullLogger(), engine=engine)


@pytest.fixture
def make_config():
    return compose_config
