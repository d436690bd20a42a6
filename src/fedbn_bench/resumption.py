"""What ``resume`` means for the run directory ``run.py`` was given (``docs/runs.md``).

``resume=<dir>``: continue the run in ``<dir>`` from its checkpoint, with *its own* config: the
overrides saved in ``<dir>/.hydra/overrides.yaml``, then those given now (the ones given now win;
``checkpoint.config_differences`` still refuses a change that would alter the run's numbers).
``resume=auto``: the run directory decides; a run that ended (``completed`` or ``diverged``) is
left as it is, one with a checkpoint continues, anything else starts over. A sweep re-run with
``resume=auto`` in its directory thus skips completed jobs and resumes interrupted ones.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, Sequence

from hydra import compose
from omegaconf import DictConfig, OmegaConf

from fedbn_bench.engine.checkpoint import FILENAME
from fedbn_bench.records.run_dirs import quoted_override

ENDED = ("completed", "diverged")
"""Statuses ``resume=auto`` leaves as they are (training again would give the same records)."""


def ended_summary(run_dir: str | Path) -> Optional[dict[str, Any]]:
    """The summary of the run in ``run_dir`` if it ended (``ENDED``), else ``None``."""
    path = Path(run_dir) / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return summary if summary.get("status") in ENDED else None


def resumed_config(cfg: DictConfig, run_dir: str | Path, given: Sequence[str]) -> DictConfig:
    """The config that runs ``run_dir`` after ``resume=<cfg.resume>`` (see the module docstring):
    ``cfg`` itself for a fresh run, else the run's own config recomposed with the overrides ``given``
    now (``resume`` set to the directory resumed; ``resume=null`` when ``auto`` starts afresh)."""
    if not cfg.resume:
        return cfg
    source = Path(run_dir) if cfg.resume == "auto" else Path(cfg.resume)
    if cfg.resume == "auto" and not (source / FILENAME).is_file():
        OmegaConf.update(cfg, "resume", None)
        return cfg
    saved_file = source / ".hydra" / "overrides.yaml"
    saved = [str(o) for o in OmegaConf.load(saved_file)] if saved_file.is_file() else []
    merged = {_key(o): o for o in saved}
    merged.update({_key(o): o for o in given})
    merged["resume"] = quoted_override("resume", str(source))
    return compose(config_name="config", overrides=list(merged.values()))


def quote_resume(argv: Sequence[str]) -> list[str]:
    """The command line with an unquoted ``resume=<dir>`` quoted (``quoted_override``), so a sweep
    job's directory (``3_norm=bn,seed=1``) is passed as it is written."""
    return [quoted_override("resume", arg.partition("=")[2])
            if arg.startswith("resume=") and arg[len("resume="):][:1] not in ("'", '"', "") else arg
            for arg in argv]


def _key(override: str) -> str:
    return override.partition("=")[0].lstrip("+~")
