"""Run directories: created atomically so two runs never share one, and never reused silently.

Hydra names a run's directory after ``hydra.run.dir`` (a sweep's after ``hydra.sweep.dir``). A
pattern with a time stamp (``${now:...}``, the default) names a *new* directory: ``claim`` creates
it with one ``mkdir`` and, where another run took the name first (two runs started in the same
second, a SLURM array, a shell loop with ``&``), the next free ``<name>-2``, ``<name>-3``, ... A
pattern without one (``hydra.run.dir=<dir>``, a preset's ``results/<paper>/<id>/runs``) names a
*fixed* directory: when it already holds a run, the command must say what to do, ``resume=auto``
(continue it, or leave it if it completed) or ``overwrite=true`` (start over); otherwise it is
refused before anything is written; ``overwrite=true`` clears each run's records only when it starts
training (``start_over``). ``resume=<dir>`` runs in ``<dir>`` itself.
``RunDirectories`` applies this as a Hydra callback, before Hydra creates or writes anything, and
then claims the directory for the run (``run_lock.py``: a second live run there is refused).
"""
from __future__ import annotations

import itertools
import shutil
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from fedbn_bench.records.run_lock import DirectoryInUse, acquire

RECORDS = ("summary.json", "metrics.csv", "checkpoint.pt", "replicas.json")
"""A directory holding any of these holds a run."""
RUN_FILES = (*RECORDS, "partition.csv", "wandb_id", "run.log")
"""What ``overwrite=true`` removes from a run directory before the new run starts."""
STAGED = ".hydra-overwrite"
"""Where Hydra writes the config of an ``overwrite=true`` run into a directory holding a run (``start_over``
moves it to ``.hydra``), so that a job failing before its first round leaves the old run's config with its records."""
_created: set[Path] = set()


def holds_run(path: str | Path) -> bool:
    """Whether ``path`` (or a job directory below it at any depth, for a sweep) holds the records of a run."""
    path = Path(path)
    return any((path / name).exists() or next(path.glob(f"**/{name}"), None) for name in RECORDS)


def claim(path: str | Path, exact: bool = False) -> Path:
    """Create ``path`` atomically, or, if it exists, the first free ``path-2``, ``path-3``, ...;
    returns the directory created (``created_here`` then says so). ``exact``: a fixed directory,
    ``path`` itself even when another run created it first (its lock then decides, ``run_lock.py``)."""
    path = Path(path).absolute()
    for parent in reversed(path.parents):
        try:
            parent.mkdir()
            _created.add(parent)
        except FileExistsError:
            pass
    for n in itertools.count(1):
        candidate = path if n == 1 else path.with_name(f"{path.name}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            if exact:
                return candidate
            continue
        _created.add(candidate)
        return candidate
    raise AssertionError("unreachable")


def created_here(path: str | Path) -> bool:
    """Whether this process created ``path`` (``claim``): a command that fails before training may remove it."""
    return Path(path).absolute() in _created


def discard_if_created_here(path: str | Path) -> None:
    """Remove ``path`` and its parents that ``claim`` created (``outputs/<date>``) if this process
    created it and they are empty then: a command refused before training leaves nothing."""
    path = Path(path).absolute()
    if not created_here(path):
        return
    shutil.rmtree(path, ignore_errors=True)
    for parent in path.parents:
        if parent not in _created or any(parent.iterdir()):
            return
        parent.rmdir()


def clear_runs(path: str | Path) -> None:
    """Remove the records (``RUN_FILES``) of the run in ``path`` and of the runs (replicas) in its
    subdirectories: ``overwrite=true``, when the new run is about to write its first record (a job that
    fails before that leaves the old records as they were)."""
    for name in RUN_FILES:
        for found in [Path(path) / name, *Path(path).glob(f"**/{name}")]:
            found.unlink(missing_ok=True)


def start_over(path: str | Path) -> None:
    """``overwrite=true``, once the new run in ``path`` is about to write its first record: remove the old
    run's records and put the new run's config (``STAGED``) in place of its ``.hydra``."""
    clear_runs(path)
    staged = Path(path) / STAGED
    if staged.is_dir():
        shutil.rmtree(Path(path) / ".hydra", ignore_errors=True)
        staged.rename(Path(path) / ".hydra")


def refusal(path: str | Path) -> str:
    """The error for a fixed directory that already holds a run and a command that said nothing."""
    return (f"{path} already holds a run; pass resume=auto to continue it (a completed run is left as it is) "
            "or overwrite=true to start it over")


def is_fresh_pattern(pattern: Any) -> bool:
    """Whether a directory pattern names a new directory each time (it has a ``${now:...}`` stamp)."""
    return "${now:" in str(pattern)


class RunDirectories(Callback):
    """Chooses the run's (or sweep's) directory before Hydra creates it (see the module docstring)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        pattern = OmegaConf.to_container(config.hydra.run, resolve=False)["dir"]
        resume = config.get("resume")
        if resume and resume != "auto":
            if not holds_run(resume):
                _refuse(f"resume={resume}: no run there (no {' or '.join(RECORDS)})")
            _set(config, "run", str(resume), keep_hydra_files=True)
            _claim(config.hydra.run.dir)
            return
        target = Path(str(config.hydra.run.dir))
        if is_fresh_pattern(pattern):
            _set(config, "run", str(claim(target)))
        elif holds_run(target) and resume == "auto":
            _set(config, "run", str(target), keep_hydra_files=True)
        elif holds_run(target) and not config.get("overwrite"):
            _refuse(refusal(target))
        elif holds_run(target):
            _stage_hydra_files(config)
        elif not target.exists():
            _set(config, "run", str(claim(target, exact=True)))
        _claim(config.hydra.run.dir)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """A sweep job claims its directory (a single run did in ``on_run_start``); refused, the job
        ends with exit status 2 (Hydra turns a callback's exception into a warning)."""
        _claim(config.hydra.runtime.output_dir)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        pattern = OmegaConf.to_container(config.hydra.sweep, resolve=False)["dir"]
        target = Path(str(config.hydra.sweep.dir))
        if is_fresh_pattern(pattern):
            _set(config, "sweep", str(claim(target)))
        elif holds_run(target) and not config.get("overwrite") and config.get("resume") != "auto":
            _refuse(refusal(target).replace("a run;", "the runs of a sweep;"))
        elif holds_run(target) and config.get("overwrite"):
            _stage_hydra_files(config)


def _stage_hydra_files(config: DictConfig) -> None:
    """Have Hydra write the run's (each job's) config to ``STAGED`` instead of ``.hydra``."""
    with read_write(config.hydra), open_dict(config.hydra):
        config.hydra.output_subdir = STAGED
        config.hydra.overrides.hydra.append(f"hydra.output_subdir={STAGED}")  # a sweep recomposes each job's config


def _set(config: DictConfig, mode: str, path: str, keep_hydra_files: bool = False) -> None:
    """Point ``hydra.<mode>.dir`` at ``path``; ``keep_hydra_files``: leave the ``.hydra`` files of the
    run there as they are (Hydra writes none)."""
    with read_write(config.hydra), open_dict(config.hydra):
        config.hydra[mode].dir = path
        if keep_hydra_files:
            config.hydra.output_subdir = None


def _claim(run_dir: str) -> None:
    try:
        acquire(run_dir)
    except DirectoryInUse as err:
        _refuse(str(err))


def _refuse(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)
