"""The choices of each config group, read from ``conf/``, and the one-line error for a choice that
does not exist (``norm=batchnrm``, ``experiment=fbn/fig3a_fmnst``), naming the nearest ones.

Hydra's own message lists the options of a flat group but not of a nested one (``experiment``),
and never says which is closest; this check runs before Hydra composes anything.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from fedbn_bench.config.validate import nearest

INTERNAL = ("hydra", "schema")
"""Groups that are Hydra's own or the schemas' (``schema/*`` lives in the ConfigStore, not in ``conf/``)."""

SWEEP_SYNTAX = "()[]{}*$'\""
"""Characters of Hydra's sweep functions and interpolations: such a value is left to Hydra."""

OTHER_CONFIGS = ("--config-dir", "-cd", "--config-path", "-cp", "--config-name", "-cn", "hydra.searchpath",
                 "+hydra.searchpath", "++hydra.searchpath")
"""Command-line options that make Hydra read configs from elsewhere than ``conf/``."""


def public_groups(conf_dir: Path) -> list[str]:
    """The config groups a user picks from: the top-level folders of ``conf/`` but Hydra's."""
    return sorted(p.name for p in conf_dir.iterdir() if p.is_dir() and p.name not in INTERNAL)


def group_choices(conf_dir: Path, group: str) -> list[str]:
    """The options of ``group`` (``norm``, ``experiment``, ``experiment/hbn/table1_method``):
    its YAML files, with their subfolder for nested groups (``fbn/fig3a``)."""
    root = conf_dir / group
    return sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.yaml"))


def user_choices(conf_dir: Path, group: str) -> list[str]:
    """The options of ``group`` meant for the command line: for ``experiment``, the presets of each
    paper (``<paper>/<preset>``), not the parts they compose (``fbn/base/...``, ``hbn/table1_method/...``)."""
    return [c for c in group_choices(conf_dir, group) if group != "experiment" or c.count("/") == 1]


def unknown_choice(argv: Sequence[str], conf_dir: Path) -> Optional[str]:
    """The one-line error for the first ``group=value`` override whose value is not an option of
    that group, naming the nearest options (``None`` when every choice exists, or when another config
    directory is searched too: then Hydra alone knows the options)."""
    if any(arg.split("=")[0] in OTHER_CONFIGS for arg in argv):
        return None
    for arg in argv:
        key, sep, value = arg.partition("=")
        group = key.lstrip("+~").split("@")[0]
        if not sep or group.startswith("hydra") or not (conf_dir / group).is_dir() or any(c in value for c in SWEEP_SYNTAX):
            continue
        choices = group_choices(conf_dir, group)
        for name in value.split(","):
            if name and name != "null" and name not in choices:
                hint = nearest(name, choices) or f" Choices: {', '.join(user_choices(conf_dir, group))}."
                return f"{group}={name} is not an option of `{group}` (conf/{group}/).{hint}"
    return None
