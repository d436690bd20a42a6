"""Config groups build their objects, schemas reject typos, validation and user errors are one line.

(That every YAML composes is tests/test_experiment_configs.py.)"""
from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
import torch
from omegaconf import OmegaConf

from conftest import CONF, ROOT, compose_config
from fedbn_bench import cli as cli_module
from fedbn_bench.algorithms import build_algorithm
from fedbn_bench.config.validate import validate_client_sizes, validate_config
from fedbn_bench.data import DATASETS, DatasetError
from fedbn_bench.engine.sampling import participating
from fedbn_bench.errors import ConfigError, UserError
from fedbn_bench.models import MODELS, build_model
from fedbn_bench.norms import NORMS, build_norm
from fedbn_bench.partition import PARTITIONS, PartitionError, make_partition, partition_params


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("norm", options("norm"))
def test_every_norm_builds_and_its_statistics_name_the_model_layers(norm):
    method = build_norm(compose_config([f"norm={norm}"]).norm)
    model = build_model("fbn_cnn", method.norm_layer, (1, 8, 8), 10)
    x = torch.randn(4, 1, 8, 8)
    if method.statistics_before_training:
        stages = []
        method.pass_statistics(model, [x], lambda i: None, stages.append)
        stats = {name: s for stage in stages for name, s in stage[0].items()}
    else:
        model.train()(x)
        stats = method.client_statistics(model, 4)
    assert {name.split(":")[0] for name in stats} <= {name for name, _ in model.named_modules()}  # ":adv": dual BN
    assert all(bool((s.var >= 0).all()) for s in stats.values())


@pytest.mark.parametrize("algo", options("algo"))
def test_every_algo_builds_with_the_runs_learning_rate(algo):
    cfg = compose_config([f"algo={algo}", "lr=0.3"])
    assert build_algorithm(cfg.algo).cfg.lr == 0.3


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


# --------------------------------------------------------------------------- small clients (audit #6)


def test_small_clients_refuse_is_one_error_naming_the_way_out():
    with pytest.raises(ConfigError) as err:
        validate_client_sizes([40, 3, 70, 2], 4, needs_two=True)  # default: refuse
    message = str(err.value)
    assert "\n" not in message and "batch_size=4" in message and "client 3's data (2 samples" in message
    assert "2 of 4 clients" in message and "small_clients=skip" in message
    validate_client_sizes([4, 5], 4, needs_two=True)  # exactly one batch is enough


def test_small_clients_skip_warns_once_and_refuses_only_when_nobody_can_train(caplog):
    with caplog.at_level(logging.WARNING, logger="fedbn_bench"):
        validate_client_sizes([40, 3, 70, 2], 4, needs_two=True, small_clients="skip")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["small_clients=skip: 2 of 4 clients hold fewer than batch_size=4 samples and will never "
                        "train or upload"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fedbn_bench"):
        validate_client_sizes([40, 70], 4, needs_two=True, small_clients="skip")
    assert not caplog.records  # nothing skipped, nothing said
    with pytest.raises(ConfigError, match="no client holds a full batch of batch_size=64 .largest client: 63"):
        validate_client_sizes([0, 63, 10], 64, needs_two=True, small_clients="skip")
    with pytest.raises(ConfigError, match="batch_size=1 is invalid"):
        validate_client_sizes([0, 5], 1, needs_two=True, small_clients="skip")


def test_participating_drops_exactly_the_clients_without_a_batch():
    sizes = torch.tensor([64, 63, 0, 200, 64])
    assert participating([0, 1, 2, 3, 4], sizes, 64) == [0, 3, 4]
    assert participating([1, 2], sizes, 64) == []
    assert participating([3, 1], sizes, 1) == [3, 1]  # order kept; under refuse nobody is dropped


@pytest.mark.parametrize(
    "overrides, key",
    [(["small_clients=drop"], "small_clients='drop' is unknown; allowed: auto, refuse, skip, cycle"),
     (["partition=dirichlet", "partition.scheme=hsu"], "partition.scheme='hsu' is unknown; allowed: per_class, per_client")],
)
def test_new_keys_are_validated(overrides, key):
    with pytest.raises(ConfigError, match=key):
        validate_config(compose_config(overrides))


HBN_TINYIMAGENET = ["dataset=tinyimagenet", "partition=dirichlet", "partition.min_size=0", "num_clients=500",
                    "clients_per_round=10", "batch_size=64", "norm=hbn"]
"""HBN §4.1 / Table 1: Tiny-ImageNet, 500 clients, 10 per round, B=64, Dir(phi) unconditioned (HBN's code)."""


def hbn_tinyimagenet_sizes(cfg) -> list[int]:
    """The runner's partition + size check path on fake Tiny-ImageNet labels (200 classes x 500)."""
    labels = torch.arange(200).repeat_interleave(500)
    p = cfg.partition
    parts = make_partition(p.name, labels, cfg.num_clients, cfg.seed, **partition_params(p))
    return [len(c) for c in parts]


def test_hbn_tinyimagenet_setting_composes_and_validates(caplog):
    # phi=0.1: the smallest of the 500 clients still holds a batch, so even `refuse` runs
    cfg = compose_config([*HBN_TINYIMAGENET, "alpha=0.1"])
    validate_config(cfg)
    sizes = hbn_tinyimagenet_sizes(cfg)
    assert len(sizes) == 500 and sum(sizes) == 100_000 and min(sizes) >= 64
    validate_client_sizes(sizes, cfg.batch_size, needs_two=True, small_clients=cfg.small_clients)
    # phi=0.05 (Table 1's other column): one client of 63 samples; refuse says so, skip runs without it
    # (the default, cycle, would train it on one batch of its samples repeated: issue 58)
    cfg = compose_config([*HBN_TINYIMAGENET, "alpha=0.05", "small_clients=refuse"])
    validate_config(cfg)
    sizes = hbn_tinyimagenet_sizes(cfg)
    assert sorted(sizes)[0] == 63 and sorted(sizes)[1] >= 64
    with pytest.raises(ConfigError) as err:
        validate_client_sizes(sizes, cfg.batch_size, needs_two=True, small_clients=cfg.small_clients)
    assert "\n" not in str(err.value) and "(63 samples; 1 of 500 clients hold fewer than 64)" in str(err.value)
    cfg = compose_config([*HBN_TINYIMAGENET, "alpha=0.05", "small_clients=skip"])
    validate_config(cfg)
    with caplog.at_level(logging.WARNING, logger="fedbn_bench"):
        validate_client_sizes(sizes, cfg.batch_size, needs_two=True, small_clients=cfg.small_clients)
    assert "1 of 500 clients" in caplog.text
    assert participating(list(range(500)), torch.tensor(sizes), cfg.batch_size) == [
        c for c in range(500) if sizes[c] != 63]
