"""A preset that sweeps a grid runs with ``-m``; without it, only one run of its grid, named in full.

A paper preset (``conf/experiment/<paper>/<id>.yaml``) lists the keys it sweeps under
``hydra.sweeper.params``, which Hydra reads only in a ``-m`` sweep. Without ``-m`` the same command
used to run the preset's defaults, a run that is none of its grid's (issue 52: ``experiment=fbn/fig3a_toy``
trained BN under FedAvg, the preset sweeps DSGD's methods). ``GridPresetGuard`` (a Hydra callback)
refuses such a command with one ``error:`` line naming the ``-m`` command and a run of the grid; a command
that sets every swept key itself is that run, and runs.
"""
from __future__ import annotations

import math
import sys
from typing import Any, Optional

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

FUNCTION = "("
"""A sweep value with a function (``range(...)``, ``interval(...)``): no list of values to count or pick from."""


def unswept_keys(params: dict[str, str], given: list[str]) -> list[str]:
    """The keys of ``params`` (a preset's sweep) that the command-line overrides ``given`` leave open."""
    fixed = {o.partition("=")[0].lstrip("+~") for o in given if "=" in o}
    return [key for key in params if key.lstrip("+~") not in fixed]


def grid_size(params: dict[str, str]) -> Optional[int]:
    """How many runs the sweep ``params`` holds (``None`` when a value is a sweep function)."""
    if any(FUNCTION in str(values) for values in params.values()):
        return None
    return math.prod(len(str(values).split(",")) for values in params.values())


def grid_refusal(preset: str, params: dict[str, str], missing: list[str]) -> str:
    """The error for a run of ``preset`` that leaves its swept keys ``missing`` open."""
    size = grid_size(params)
    runs = f"a grid of {size} runs" if size else "a sweep"
    example = " ".join(f"{key}={str(params[key]).split(',')[0]}" for key in missing)
    one = "" if grid_size({k: params[k] for k in missing}) is None else f", or one of its runs by setting {example}"
    return (f"experiment={preset} is {runs} over {', '.join(missing)}: run it with -m "
            f"(python run.py -m experiment={preset}){one}")


class GridPresetGuard(Callback):
    """Refuses a single run of a preset that sweeps, unless it sets every swept key (see the module docstring)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        params = dict(config.hydra.sweeper.get("params") or {})
        resume = config.get("resume")
        if not params or (resume and resume != "auto"):
            return
        missing = unswept_keys(params, list(config.hydra.overrides.task))
        if missing:
            preset = config.hydra.runtime.choices.get("experiment") or "null"
            print(f"error: {grid_refusal(preset, params, missing)}", file=sys.stderr)
            sys.exit(2)
