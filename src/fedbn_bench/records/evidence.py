"""The committed evidence, ``results/``, is read-only to a user's runs: recording into it is an explicit act.

A paper preset names the folder of its committed runs, ``hydra.sweep.dir: results/<paper>/<id>/runs``,
which ``scripts/claims.py`` and ``scripts/make_figures.py`` read. A command writes under ``results/``
only with ``record=true``. Without it, a preset's sweep writes to a new folder of the user's,
``multirun/<paper>/<id>/<date>/<time>`` (one line names it), and a folder under ``results/`` named on
the command line (``hydra.sweep.dir``, ``hydra.run.dir``, ``resume``) is refused with one ``error:``
line. ``record=true`` with a folder outside ``results/`` is refused too (there is nothing to record).

``results/`` is the one beside ``conf/`` (the project's), and the one in the working directory.
``EvidenceGuard`` applies this as a Hydra callback, before ``run_dirs.RunDirectories`` picks the folder.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, open_dict, read_write

EVIDENCE = "results"
OWN_SWEEPS = "multirun"
STAMP = "${now:%Y-%m-%d}/${now:%H-%M-%S}"


def evidence_roots(config: DictConfig) -> list[Path]:
    """The ``results/`` folders a command must not write to without ``record=true``."""
    sources = config.hydra.runtime.get("config_sources") or []
    confs = [Path(s.path) for s in sources if s.get("provider") == "main" and s.get("schema") == "file"]
    return [normalised(p.parent / EVIDENCE) for p in confs] + [normalised(EVIDENCE)]


def normalised(path: str | Path) -> Path:
    """``path`` absolute, with ``..`` and ``.`` taken out (``outputs/../results/x`` is ``results/x``)."""
    return Path(os.path.abspath(path))


def evidence_part(path: str | Path, roots: list[Path]) -> Optional[Path]:
    """``path`` relative to the ``results/`` folder it lies in (``None``: outside every one)."""
    path = normalised(path)
    for root in roots:
        if path == root or root in path.parents:
            return path.relative_to(root)
    return None


def own_sweep_dir(part: Path) -> str:
    """Where a preset's sweep writes instead of ``results/<part>``: ``multirun/<paper>/<id>/<date>/<time>``."""
    name = part.parent if part.name == "runs" else part
    return f"{OWN_SWEEPS}/{name.as_posix()}/{STAMP}"


def named_on_command_line(config: DictConfig, key: str) -> bool:
    """Whether the command line set ``hydra.<key>`` itself (not the preset)."""
    return any(o.partition("=")[0].lstrip("+~") == f"hydra.{key}" for o in config.hydra.overrides.hydra)


def refusal(folder: str, how: str) -> str:
    """The error for a command that would write to the committed runs in ``folder`` without ``record=true``."""
    return (f"{folder} is under results/, the committed evidence: add record=true to record into it "
            f"(docs/runs.md), or give {how} a folder of your own")


class EvidenceGuard(Callback):
    """Keeps a command's writes out of ``results/`` unless it says ``record=true`` (see the module docstring)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        resume = config.get("resume")
        folder = resume if resume and resume != "auto" else str(config.hydra.run.dir)
        inside = evidence_part(folder, evidence_roots(config)) is not None
        how = "resume" if folder == resume else "hydra.run.dir"
        _check(inside, bool(config.get("record")), folder, how)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        folder = str(config.hydra.sweep.dir)
        part = evidence_part(folder, evidence_roots(config))
        record = bool(config.get("record"))
        if part is not None and not record and not named_on_command_line(config, "sweep.dir"):
            own = own_sweep_dir(part)
            print(f"{folder} holds the preset's committed runs; this sweep writes to {own.split('/$')[0]}/<date>/<time> "
                  "(record=true records into results/: docs/runs.md)", file=sys.stderr)
            with read_write(config.hydra), open_dict(config.hydra):
                config.hydra.sweep.dir = own
                config.hydra.overrides.hydra.append(f"hydra.sweep.dir='{own}'")  # each job's config is recomposed
            return
        _check(part is not None, record, folder, "hydra.sweep.dir")


def _check(inside: bool, record: bool, folder: str, how: str) -> None:
    if inside and not record:
        _refuse(refusal(folder, how))
    if record and not inside:
        _refuse(f"record=true records into results/, but this command writes to {folder}; drop record=true, "
                "or name a folder under results/")


def _refuse(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)
