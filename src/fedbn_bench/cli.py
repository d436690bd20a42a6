"""What ``run.py`` needs besides the runner: schema registration, the user-facing error, ``--help``,
and the checks of the command line Hydra does not make well (a launcher's plugin is installed, a
group's choice exists, every key and value fits the schema)."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Optional, Sequence

from fedbn_bench.config.choices import unknown_choice
from fedbn_bench.config.help import help_text
from fedbn_bench.config.override_check import override_error
from fedbn_bench.config.schema import register_schemas
from fedbn_bench.errors import UserError

__all__ = ["UserError", "command_line_error", "help_text", "missing_launcher", "register_schemas"]

LAUNCHER_PLUGINS = {
    "ray_cluster": ("hydra_plugins.hydra_ray_launcher", "hydra-ray-launcher"),
    "slurm": ("hydra_plugins.hydra_submitit_launcher", "hydra-submitit-launcher"),
}
"""``hydra/launcher=<name>`` -> (the plugin's module, the package that provides it); ``joblib`` is
fedbn-bench's own launcher (``config/schema.py``: ``ProcessLauncherConfig``; ``processes`` too), always there."""


def missing_launcher(argv: Sequence[str]) -> Optional[str]:
    """The one-line error for a ``hydra/launcher=<name>`` override whose plugin is not installed
    (``None`` when every launcher asked for is there)."""
    for arg in argv:
        key, _, name = arg.partition("=")
        if key.lstrip("+~") != "hydra/launcher" or name not in LAUNCHER_PLUGINS:
            continue
        module, package = LAUNCHER_PLUGINS[name]
        if importlib.util.find_spec(module) is None:
            return f"hydra/launcher={name} needs the Hydra plugin `{package}`, which is not installed: pip install {package}"
    return None


def command_line_error(argv: Sequence[str], conf_dir: Path) -> Optional[str]:
    """The one-line error for the command line before Hydra parses it (``None`` when it is fine)."""
    return missing_launcher(argv) or unknown_choice(argv, conf_dir) or override_error(argv, conf_dir)
