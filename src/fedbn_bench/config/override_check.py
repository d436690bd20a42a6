"""The one-line error for an override the schema does not take, before Hydra runs anything.

Hydra reports a misspelt key (``nrom=fbn``, ``partition.alhpa=3``) or a wrong type (``rounds=abc``) as a
multi-line error with exit status 1, and accepts a key added with ``+`` to a schema that lacks it
(``+partition.alhpa=3``). ``override_error`` composes the command's config once, with the first value of
each swept override, and turns each of these into one line naming the key, what is allowed and the
nearest key: the ``key=``, ``group.key=`` and ``+key=`` forms alike; and ``logger.mode=online`` without a
W&B login.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Optional, Sequence

from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException, OverrideParseException
from omegaconf import Container, DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

from fedbn_bench.config.choices import OTHER_CONFIGS, group_choices, public_groups
from fedbn_bench.config.validate import unknown_key
from fedbn_bench.records.loggers import wandb_login_missing

SWEEP_FLAGS = ("-m", "--multirun")
TYPE_NAMES = {"Integer": "an integer", "Float": "a number", "bool": "true or false"}
"""What a value of a type is, by the name OmegaConf's conversion error gives it."""
PLAIN_VALUE = re.compile(r"^[\w./:-]*$")


def override_error(argv: Sequence[str], conf_dir: Path) -> Optional[str]:
    """The one-line error for the first override of ``argv`` that the composed config does not take
    (``None`` when all fit, or when the command line has Hydra flags or other config directories this
    check does not follow)."""
    overrides = [a for a in argv if a not in SWEEP_FLAGS]
    if any(a.startswith("-") or a.split("=")[0] in OTHER_CONFIGS for a in overrides):
        return None
    try:
        parsed = [o for o in OverridesParser.create().parse_overrides(overrides) if not o.key_or_group.startswith("hydra")]
    except OverrideParseException as err:
        return str(err).strip().splitlines()[0]
    single = [line for o in parsed if (line := one_value(o)) is not None]
    try:
        cfg = composed(conf_dir, single)
    except ConfigCompositionException as err:
        return composition_error(err, conf_dir, single)
    except Exception:  # noqa: BLE001 - what Hydra reports otherwise (e.g. ``preset=null``) is left to Hydra
        return None
    errors = [*(added_key_error(cfg, o.get_key_element()) for o in parsed), *(swept_value_error(cfg, o) for o in parsed)]
    return next((e for e in errors if e is not None), None) or wandb_login_missing(cfg.logger)


def one_value(override: Any) -> Optional[str]:
    """``override`` as it is for one run: a sweep's first value (``None``: a sweep with no list to pick from)."""
    if not override.is_sweep_override():
        return override.input_line
    try:
        first = next(override.sweep_string_iterator())
    except (StopIteration, Exception):  # noqa: BLE001 - interval and other distributions: left to the sweeper
        return None
    value = first if PLAIN_VALUE.match(first) else "'{}'".format(first.replace("'", "\\'"))
    return f"{override.get_key_element()}={value}"


def composed(conf_dir: Path, overrides: list[str]) -> DictConfig:
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def composition_error(err: ConfigCompositionException, conf_dir: Path, overrides: list[str]) -> str:
    """One line for Hydra's composition error ``err``: an unknown key, a wrong type, or Hydra's first line."""
    cause = err.__cause__
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)) and cause.full_key:
        cfg = composed_without(conf_dir, overrides, cause.full_key)
        return unknown_key_error(cfg, cause.full_key, group_hint(conf_dir, cause.full_key))
    if isinstance(cause, ValidationError) and cause.full_key:
        value = next((o.partition("=")[2] for o in overrides if o.partition("=")[0].lstrip("+~") == cause.full_key), "")
        return type_error(cause.full_key, value, cause)
    return str(err).strip().splitlines()[0]


def composed_without(conf_dir: Path, overrides: list[str], key: str) -> DictConfig:
    """The config of ``overrides`` without those of ``key``, and without any other that fails to compose
    (a second mistake on the command line: the error names the first one only; the defaults when one
    names no key). An override of a key below ``key`` goes with it (``wandb.mode=x`` when ``wandb`` is unknown)."""
    rest = [o for o in overrides if not under(o.partition("=")[0].lstrip("+~"), key)]
    if rest == overrides:
        return composed(conf_dir, [])
    try:
        return composed(conf_dir, rest)
    except ConfigCompositionException as err:
        failed = getattr(err.__cause__, "full_key", None)
        return composed_without(conf_dir, rest, failed) if failed else composed(conf_dir, [])


def under(override_key: str, key: str) -> bool:
    """Whether ``override_key`` is ``key`` or a key below it."""
    return override_key == key or override_key.startswith(key + ".")


def type_error(key: str, value: Any, err: ValidationError) -> str:
    """The error for ``key=value``, a value the schema's type for ``key`` does not take (``err``)."""
    kind = re.search(r"converted to (\w+)|not a valid (bool)", str(err.msg))
    allowed = TYPE_NAMES.get(next(g for g in kind.groups() if g), "") if kind else ""
    return (f"{key}={value} is invalid: `{key}` takes {allowed}" if allowed
            else f"{key}={value} is invalid: {str(err.msg).splitlines()[0]}")


def swept_value_error(cfg: DictConfig, override: Any) -> Optional[str]:
    """The error for a value after the first of a swept key (``rounds=1,abc``; the first was composed), by
    setting each on ``cfg``'s typed node; a group's choices are ``choices.unknown_choice``'s to check."""
    key = override.key_or_group
    node = OmegaConf.select(cfg, key, default=cfg)
    if not override.is_sweep_override() or isinstance(node, Container):  # absent (cfg itself), or a group
        return None
    try:
        values = list(override.sweep_iterator())[1:]
    except Exception:  # noqa: BLE001 - interval and other distributions: left to the sweeper
        return None
    for value in values:
        try:
            OmegaConf.update(cfg, key, value, merge=True)
        except ValidationError as err:
            return type_error(key, value, err)
    return None


def unknown_key_error(cfg: DictConfig, key: str, hint: str = "") -> str:
    """The error for ``key``, which the node above it in ``cfg`` does not have (``hint``: after the nearest key)."""
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    return unknown_key(key, leaf, [str(k) for k in node], owner(parent, node), hint)


def group_hint(conf_dir: Path, key: str) -> str:
    """For a top-level ``key`` that names an option of a group (``wandb`` of ``logger``): how to pick it and
    where its keys go; else nothing."""
    if "." in key:
        return ""
    return next((f" `{key}` is an option of `{g}`: {g}={key}, its keys {g}.<key>." for g in public_groups(conf_dir)
                 if key in group_choices(conf_dir, g)), "")


def owner(parent: str, node: DictConfig) -> Optional[str]:
    """How an error names the node ``parent`` (``None``: the top level), e.g. the backticked name and ``(dirichlet)``."""
    return f"`{parent}`" + (f" ({node.name})" if "name" in node else "") if parent else None


def added_key_error(cfg: DictConfig, key_element: str) -> Optional[str]:
    """The error for a ``+key=value`` override whose key the schema above it lacks (``None``: none, or
    a key of a free mapping such as ``dataset.options``)."""
    if not key_element.startswith("+") or "/" in key_element:
        return None
    key = key_element.lstrip("+").split("@")[0]
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    schema = OmegaConf.get_type(node) if isinstance(node, DictConfig) else None
    if schema is None or not dataclasses.is_dataclass(schema) or leaf in {f.name for f in dataclasses.fields(schema)}:
        return None
    return unknown_key(key, leaf, [f.name for f in dataclasses.fields(schema)], owner(parent, node))
