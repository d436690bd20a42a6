"""What ``run.py`` needs besides the runner: schema registration, the user-facing error, and the
check that a launcher chosen on the command line has its Hydra plugin installed."""
from __future__ import annotations

import importlib.util
from typing import Optional, Sequence

from fedbn_bench.config.schema import register_schemas
from fedbn_bench.errors import UserError

__all__ = ["UserError", "missing_launcher", "register_schemas"]

LAUNCHER_PLUGINS = {
    "ray_cluster": ("hydra_plugins.hydra_ray_launcher", "hydra-ray-launcher"),
    "slurm": ("hydra_plugins.hydra_submitit_launcher", "hydra-submitit-launcher"),
    "joblib": ("hydra_plugins.hydra_joblib_launcher", "hydra-joblib-launcher"),
}
"""``hydra/launcher=<name>`` -> (the plugin's module, the package that provides it)."""


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
