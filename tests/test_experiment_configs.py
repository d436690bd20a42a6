"""Every YAML under conf/ composes: each option of each config group, each experiment file, and
each value of each experiment's sweep, and the experiments pass ``validate_config``.

A sweep value of a plain key (``seed``, ``lr``, ``gamma``, ...) is set on the experiment's composed
config (``OmegaConf.update``, which type-checks it against the schema as Hydra does); a value that
selects a config group or adds/removes a key is composed by Hydra, in the default run in the first
sweep that has it and in every other sweep under ``-m slow``. The experiment is composed once
(``compose_config`` composes once per worker and copies; there are hundreds of such values). A sweep's
value files are composed in their sweep, not on their own."""
from __future__ import annotations

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


def sweep_value_files() -> set[str]:
    """The experiment files that are a sweep's values (``+experiment/<paper>/method=fatbn``): each is
    composed inside its preset by ``test_every_sweep_value_composes_and_validates``."""
    files = set()
    for experiment, override in sweep_overrides():
        key, value = override.split("=", 1)
        group = key.lstrip("+~")
        if group.startswith("experiment/"):
            files.add(f"{group.removeprefix('experiment/')}/{value}")
    return files


@pytest.mark.parametrize("experiment", sorted(set(EXPERIMENTS) - sweep_value_files()))
def test_every_experiment_composes_and_validates(experiment):
    """Each preset and shared setting file on its own (a sweep's value files are composed in their sweep)."""
    validate_config(compose_config([f"experiment={experiment}"]))


def test_every_sweep_value_file_is_an_experiment_file():
    assert sweep_value_files() <= set(EXPERIMENTS)


def selects_a_group(key: str) -> bool:
    return key[0] in "+~" or (CONF / key).is_dir()


def sweep_value_cases() -> list:
    """``sweep_overrides``, a value that selects a group in the default run only in the first sweep that has
    it (218 of 556 such compositions; the same method file in every FedRBN preset): the others under
    ``-m slow``, where ``test_preset_sweeps`` also composes every job of every sweep."""
    seen: set[str] = set()
    cases = []
    for experiment, override in sweep_overrides():
        again = selects_a_group(override.split("=", 1)[0]) and override in seen
        seen.add(override)
        cases.append(pytest.param(experiment, override, marks=pytest.mark.slow) if again else (experiment, override))
    return cases


@pytest.mark.parametrize("experiment, override", sweep_value_cases())
def test_every_sweep_value_composes_and_validates(experiment, override):
    """Each value with the sweep's constants, as a run of the sweep gets it."""
    key, value = override.split("=", 1)
    if selects_a_group(key):
        others = [c for c in sweep_constants(experiment) if c != override]
        cfg = compose_config([f"experiment={experiment}", override, *others])
    else:
        cfg = compose_config([f"experiment={experiment}", *sweep_constants(experiment)])
        OmegaConf.update(cfg, key, yaml.safe_load(value), merge=False)
    validate_config(cfg)
    build_norm(cfg.norm)  # the checks their constructors make before any training
    build_algorithm(cfg.algo)


def test_a_plain_sweep_value_is_checked_like_a_composed_one():
    """The shortcut above refuses what Hydra refuses: a wrong type and an invalid value."""
    cfg = compose_config(["experiment=fbn/fig3a"])
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
