"""Every YAML under conf/ composes: each option of each config group, each experiment file, and
each value of each experiment's sweep, and the experiments pass ``validate_config``.

A sweep value of a plain key (``seed``, ``lr``, ``gamma``, ...) is set on the experiment's composed
config (``OmegaConf.update``, which type-checks it against the schema as Hydra does); a value that
selects a config group or adds/removes a key is composed by Hydra. The experiment is composed once
(Hydra's compose is about 0.14 s, and there are hundreds of such values)."""
from __future__ import annotations

import copy
import functools

import pytest
import yaml
from omegaconf import OmegaConf

from conftest import CONF, compose_config
from fedbn_bench.algorithms import build_algorithm
from fedbn_bench.config.validate import validate_config
from fedbn_bench.norms import build_norm

GROUPS = ["dataset", "partition", "model", "norm", "algo", "aggregator", "adversarial", "engine", "logger", "debug", "scale"]
EXPERIMENTS = sorted(
    p.relative_to(CONF / "experiment").with_suffix("").as_posix() for p in (CONF / "experiment").rglob("*.yaml")
)


def group_options() -> list[tuple[str, str]]:
    return [(group, p.stem) for group in GROUPS for p in sorted((CONF / group).glob("*.yaml"))]


def sweep_params(experiment: str):
    """The experiment file's own ``hydra.sweeper.params`` (empty without a sweep)."""
    hydra = OmegaConf.load(CONF / "experiment" / f"{experiment}.yaml").get("hydra", {})
    return hydra.get("sweeper", {}).get("params", {})


def sweep_constants(experiment: str) -> tuple[str, ...]:
    """The sweep's single-valued parameters (``key=value``): every run of the sweep gets them."""
    return tuple(f"{key}={value}" for key, value in sweep_params(experiment).items() if "," not in str(value))


def sweep_overrides() -> list[tuple[str, str]]:
    """(experiment, ``key=value``) for every value of every key of each experiment's sweep."""
    return [(experiment, f"{key}={value}") for experiment in EXPERIMENTS
            for key, values in sweep_params(experiment).items() for value in str(values).split(",")]


def test_every_group_and_experiment_is_found():
    assert {group for group, _ in group_options()} == set(GROUPS)
    assert "fbn/fig3a" in EXPERIMENTS


@pytest.mark.parametrize("group, option", group_options())
def test_every_group_option_composes(group, option):
    cfg = compose_config([f"{group}={option}"])
    if group not in ("debug", "scale"):
        assert cfg[group].name == option
    validate_config(cfg)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes_and_validates(experiment):
    validate_config(compose_config([f"experiment={experiment}"]))


@functools.lru_cache(maxsize=None)
def composed_experiment(experiment: str, constants: tuple[str, ...] = ()):
    return compose_config([f"experiment={experiment}", *constants])


def selects_a_group(key: str) -> bool:
    return key[0] in "+~" or (CONF / key).is_dir()


@pytest.mark.parametrize("experiment, override", sweep_overrides())
def test_every_sweep_value_composes_and_validates(experiment, override):
    """Each value with the sweep's constants, as a run of the sweep gets it."""
    key, value = override.split("=", 1)
    if selects_a_group(key):
        others = [c for c in sweep_constants(experiment) if c != override]
        cfg = compose_config([f"experiment={experiment}", override, *others])
    else:
        cfg = copy.deepcopy(composed_experiment(experiment, sweep_constants(experiment)))
        OmegaConf.update(cfg, key, yaml.safe_load(value), merge=False)
    validate_config(cfg)
    build_norm(cfg.norm)  # the checks their constructors make before any training
    build_algorithm(cfg.algo)


def test_a_plain_sweep_value_is_checked_like_a_composed_one():
    """The shortcut above refuses what Hydra refuses: a wrong type and an invalid value."""
    cfg = copy.deepcopy(composed_experiment("fbn/fig3a"))
    with pytest.raises(Exception, match="seed"):
        OmegaConf.update(cfg, "seed", "not-a-number", merge=False)
    OmegaConf.update(cfg, "rounds", 0, merge=False)
    with pytest.raises(Exception, match="rounds"):
        validate_config(cfg)


def test_debug_is_a_tiny_run_on_top_of_an_experiment():
    cfg = compose_config(["experiment=fbn/fig3a", "debug=default"])
    assert (cfg.rounds, cfg.num_clients, cfg.clients_per_round, cfg.eval_every) == (2, 2, 2, 1)
    assert cfg.logger.name == "none" and cfg.progress is False
    assert cfg.partition.name == "gamma"  # the experiment's choices stay
