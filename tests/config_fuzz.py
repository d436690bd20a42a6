"""The schema fuzzer behind ``tests/test_config_fuzz.py``: every key of every config group's
options, set to the boundary and wrong values a user types, run through the real pre-round path.

A *case* is one group option (``norm=fedrbn``), one key of the composed config under it
(``norm.temperature``) and one value (``0``, ``-1``, a huge one, a fraction where an integer is
meant, an empty or unknown string, an empty or unknown list). ``outcome(case)`` sets the value as
Hydra would (``OmegaConf.update`` on the composed, typed config: a wrong type fails as at
composition) and runs ``run_experiment`` with the round loop replaced by a stop (``drive``), so it
sees exactly what happens before the first round. It returns one of

* ``("composition", message)``: the typed schema refused the value (Hydra's own key error);
* ``("error", message)``: a ``UserError`` (the one ``error:`` line of ``run.py``);
* ``("legal", "")``: everything up to the first round accepted the value;
* ``("traceback", repr)``: anything else, a bug.

``completes(case)`` then trains a legal value to the end (``TINY``: one round) and says what went wrong
if the run did not end ``completed``.
"""
from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator
from unittest import mock

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from omegaconf.nodes import BooleanNode, FloatNode, IntegerNode, StringNode

from conftest import CONF, compose_config
from fedbn_bench.errors import UserError
from fedbn_bench.runner import run_experiment
from smoke_data import WRITERS

GROUPS = ("dataset", "partition", "model", "norm", "algo", "aggregator", "byzantine", "adversarial", "engine",
          "logger")
TINY = ["rounds=1", "num_clients=4", "algo.local_steps=1", "eval_every=1", "dataset.eval_batch_size=512"]
"""A run of one round of one local step on 4 clients: what every case starts from."""
OPTION_BASE = {"byzantine=fbn": ["num_clients=8", "clients_per_round=8"], "partition=domains": ["num_clients=5"],
               "partition=shards": ["num_clients=5"], "dataset=abide": ["model=mlp"],
               "dataset=fedbn_gaussians": ["model=mlp"], "dataset=toy_gaussian": ["model=mlp"],
               "dataset=domainnet": ["batch_size=4"]}
"""Options that need more than ``TINY`` to be valid before a key is fuzzed (FBN §5's f = 3 needs n > 6; one
client per synthetic domain; two classes per client must cover the ten classes; flat features need the MLP; the
DomainNet fixture holds 10 images per client)."""
HUGE_INT, HUGE_FLOAT = 10**6, 1e6
UNKNOWN = "nope"


@dataclass(frozen=True)
class Case:
    option: str
    """``<group>=<option>``, or ``""`` for the top-level keys under the defaults."""
    key: str
    label: str
    """Which value: zero, negative, huge, fraction, empty, unknown, empty_list, unknown_list."""
    value: Any

    def __str__(self) -> str:
        return f"{self.option or 'defaults'}: {self.key}={self.value!r}"


VALUES: dict[type, list[tuple[str, Any]]] = {
    list: [("empty_list", []), ("unknown_list", [UNKNOWN])],
    bool: [("unknown", UNKNOWN)],
    int: [("zero", 0), ("negative", -1), ("huge", HUGE_INT), ("fraction", 0.5)],
    float: [("zero", 0.0), ("negative", -1.0), ("huge", HUGE_FLOAT)],
    str: [("empty", ""), ("unknown", UNKNOWN)],
}
"""The boundary and wrong values tried for a key of each type."""
TYPED_NODES = ((ListConfig, list), (BooleanNode, bool), (IntegerNode, int), (FloatNode, float), (StringNode, str))


def values(node: Any) -> list[tuple[str, Any]]:
    """The boundary and wrong values tried for a config node: by its node type, or for an untyped node
    by its value's type (``bool`` before ``int``, since a bool is an int)."""
    kind = next((kind for node_type, kind in TYPED_NODES if isinstance(node, node_type)), None)
    if kind is None:
        value = node._value()
        kind = next((kind for kind in VALUES if isinstance(value, kind)), None)
    return VALUES.get(kind, [("zero", 0), ("negative", -1), ("unknown", UNKNOWN)])


def leaf_keys(node: DictConfig, prefix: str) -> Iterator[tuple[str, Any]]:
    """``(dotted key, node)`` of every leaf under ``node`` (lists are leaves)."""
    for key in node:
        child = node._get_node(key)
        if isinstance(child, DictConfig):
            yield from leaf_keys(child, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", child


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def base_config(option: str, data_root: Path) -> DictConfig:
    """The composed tiny config of ``option``; a dataset read from files reads tiny fixture files."""
    cfg = compose_config([*TINY, *OPTION_BASE.get(option, []), *([option] if option else [])])
    if cfg.dataset.name in WRITERS:
        root = data_root / cfg.dataset.name
        if not root.exists():
            WRITERS[cfg.dataset.name](root, cfg)
        cfg.dataset.root = str(root)
    return cfg


def top_level_cases(data_root: Path) -> Iterator[tuple[DictConfig, Case]]:
    """The cases of the top-level keys (not the groups), under the defaults."""
    cfg = base_config("", data_root)
    for key in cfg:
        if key not in GROUPS:
            node = cfg._get_node(key)
            for path, leaf in (leaf_keys(node, f"{key}.") if isinstance(node, DictConfig) else [(key, node)]):
                for label, value in values(leaf):
                    yield cfg, Case("", path, label, value)


def cases(data_root: Path) -> Iterator[tuple[DictConfig, Case]]:
    """Every case with the config it applies to: the top-level keys once under the defaults, then
    every key of each group under every option of the group."""
    yield from top_level_cases(data_root)
    for group in GROUPS:
        yield from group_cases(group, data_root)


def group_cases(group: str, data_root: Path) -> Iterator[tuple[DictConfig, Case]]:
    """Every key of ``group`` under every option of the group."""
    for option in options(group):
        cfg = base_config(f"{group}={option}", data_root)
        for path, leaf in leaf_keys(cfg[group], f"{group}."):
            for label, value in values(leaf):
                yield cfg, Case(f"{group}={option}", path, label, value)


class FirstRound(Exception):
    """Raised where the first round would start."""


@contextlib.contextmanager
def stop_before_rounds() -> Iterator[None]:
    def stop(*args: Any, **kwargs: Any) -> None:
        raise FirstRound

    with mock.patch("fedbn_bench.engine.run_loop.drive", stop), mock.patch("fedbn_bench.engine.replicas.drive", stop):
        yield


def with_value(cfg: DictConfig, case: Case) -> DictConfig:
    """A copy of ``cfg`` with the case's value set (raises as Hydra's composition would)."""
    cfg = copy.deepcopy(cfg)
    OmegaConf.update(cfg, case.key, case.value, merge=False)
    OmegaConf.to_container(cfg, resolve=True)
    return cfg


def outcome(cfg: DictConfig, case: Case, run_dir: Path) -> tuple[str, str]:
    """What the pre-round path makes of ``case`` (see the module docstring)."""
    try:
        cfg = with_value(cfg, case)
    except OmegaConfBaseException as err:
        return "composition", str(err)
    try:
        with stop_before_rounds():
            run_experiment(cfg, run_dir)
    except FirstRound:
        return "legal", ""
    except UserError as err:
        return "error", str(err)
    except Exception as err:  # noqa: BLE001 - every other exception is the bug being looked for
        return "traceback", f"{type(err).__name__}: {err}"
    return "traceback", "run_experiment returned without reaching a round"


def completes(cfg: DictConfig, case: Case, run_dir: Path) -> str | None:
    """Train ``case``'s (legal) value for the whole ``TINY`` run; ``None`` if it ends ``completed``, else why not."""
    try:
        summary = run_experiment(with_value(cfg, case), run_dir)
    except Exception as err:  # noqa: BLE001 - a legal value that cannot be trained is the finding
        return f"training raised {type(err).__name__}: {err}"
    status = summary.get("status") if isinstance(summary, dict) else None
    return None if status == "completed" else f"the run ended {status!r}, not 'completed'"


def names_key(message: str, case: Case) -> bool:
    """Whether an error message names the key at fault (its last part, or the group of a ``name``)."""
    leaf = case.key.split(".")[-1]
    return leaf in message or (leaf == "name" and case.key.split(".")[0] in message)


def misspelt(word: str) -> str:
    """``word`` with its last two letters swapped (``alpha`` -> ``alpah``), or a letter added where that changes nothing."""
    swapped = word[:-2] + word[-1] + word[-2] if len(word) > 2 else word
    return swapped if swapped != word else word + "x"


def command_line_cases(group: str) -> Iterator[tuple[list[str], str, str]]:
    """``(argv, the key at fault, the key the error must suggest or "")`` for the first option of ``group`` (the
    top level for ``""``): every leaf key misspelt as ``group.kye=1`` and ``+group.kye=1``, and every typed
    number or switch set to a word (``group.key=nope``)."""
    option = [f"{group}={options(group)[0]}"] if group else []
    cfg = compose_config(option)
    node = cfg[group] if group else cfg
    prefix = f"{group}." if group else ""
    for key, leaf in leaf_keys(node, prefix):
        if "." in key[len(prefix):] or (not group and key in GROUPS):
            continue
        wrong = prefix + misspelt(key[len(prefix):])
        yield [*option, f"{wrong}=1"], wrong, key[len(prefix):]
        yield [*option, f"+{wrong}=1"], wrong, key[len(prefix):]
        if isinstance(leaf, (IntegerNode, FloatNode, BooleanNode)):
            yield [*option, f"{key}={UNKNOWN}"], key, ""
