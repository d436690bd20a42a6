"""Config groups build their objects, schemas reject typos, validation and user errors are one line.

(That every YAML composes is tests/test_experiment_configs.py.)"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from omegaconf import OmegaConf

from conftest import CONF, ROOT, compose_config
from fedbn_bench import cli as cli_module
from fedbn_bench.algorithms import build_algorithm
from fedbn_bench.config.validate import validate_config
from fedbn_bench.data import DATASETS, DatasetError
from fedbn_bench.errors import ConfigError, UserError
from fedbn_bench.models import MODELS, build_model
from fedbn_bench.norms import NORMS, build_norm
from fedbn_bench.partition import PARTITIONS, PartitionError


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("norm", options("norm"))
@pytest.mark.parametrize("algo", options("algo"))
def test_norm_and_algo_build(norm, algo):
    cfg = compose_config([f"norm={norm}", f"algo={algo}"])
    method, algorithm = build_norm(cfg.norm), build_algorithm(cfg.algo)
    model = build_model("fbn_cnn", method.norm_layer, (1, 8, 8), 10)
    x = torch.randn(4, 1, 8, 8)
    stats = method.before_local_training(model, x)
    if stats is None:
        model.train()(x)
        stats = method.client_statistics(model, 4)
    assert set(stats) <= {name for name, _ in model.named_modules()}
    assert all(bool((s.var >= 0).all()) for s in stats.values())
    assert algorithm.cfg.lr == cfg.lr


def test_aliases_are_interpolated_into_groups():
    cfg = compose_config(["partition=dirichlet", "alpha=0.1", "lr=0.3"])
    assert cfg.partition.alpha == 0.1 and cfg.algo.lr == 0.3
    cfg = compose_config(["partition=gamma", "gamma=0.25"])
    assert cfg.partition.gamma == 0.25


@pytest.mark.parametrize(
    "override, key",
    [("partition.alhpa=3", "alhpa"), ("rounds=abc", "rounds"), ("norm.momentum=x", "norm.momentum")],
)
def test_schema_rejects_typos_and_types(override, key):
    with pytest.raises(Exception) as err:
        compose_config([override])
    assert key in str(err.value)


def test_each_partition_has_its_own_keys():
    with pytest.raises(Exception) as err:
        compose_config(["partition=shards", "partition.alpha=0.3"])  # alpha belongs to dirichlet
    assert "alpha" in str(err.value)
    assert set(compose_config(["partition=iid"]).partition) == {"name"}


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["partition=dirichlet", "alpha=0"], "alpha"),
        (["partition=gamma", "gamma=1.5"], "gamma"),
        (["clients_per_round=11"], "clients_per_round"),
        (["rounds=0"], "rounds"),
        (["lr=-1"], "lr"),
        (["algo.schedule.name=cosine"], "algo.schedule.name"),
        (["seed=-1"], "seed=-1 is invalid"),
    ],
)
def test_validation_names_the_key(overrides, key):
    with pytest.raises(ConfigError, match=key):
        validate_config(compose_config(overrides))


def test_resolved_config_is_plain_yaml():
    cfg = compose_config()
    assert "${" not in OmegaConf.to_yaml(cfg, resolve=True)


def test_user_errors_share_one_base_class():
    for error in (ConfigError, PartitionError, DatasetError):
        assert issubclass(error, UserError) and issubclass(error, ValueError)
    assert cli_module.UserError is UserError and not hasattr(cli_module, "USER_ERRORS")


@pytest.mark.parametrize(
    "registry, error",
    [(PARTITIONS, PartitionError), (DATASETS, DatasetError), (MODELS, ConfigError), (NORMS, ConfigError)],
)
def test_unknown_names_raise_the_groups_user_error(registry, error):
    with pytest.raises(error) as err:
        registry.get("nope")
    message = str(err.value)
    assert "nope" in message and "\n" not in message
    assert all(name in message for name in registry.names())


def test_negative_seed_fails_with_one_line(tmp_path):
    """Through ``run.py``, as tests/test_run.py checks the other bad inputs."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "logger=none", "progress=false", f"hydra.run.dir={tmp_path}", "seed=-1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "HYDRA_FULL_ERROR": "0"},
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: seed=-1 is invalid"), result.stderr
