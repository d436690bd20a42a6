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
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from fedbn_bench.records.atomic import atomic_write_text
from fedbn_bench.records.run_lock import DirectoryInUse, acquire
from fedbn_bench.records.run_records import RunRecorder

RECORDS = ("summary.json", "metrics.csv", "checkpoint.pt", "replicas.json")
"""A directory holding any of these holds a run."""
RUN_FILES = (*RECORDS, "partition.csv", "wandb_id")
"""What ``overwrite=true`` moves aside from a run directory before the new run starts (``run.log``, which
Hydra's handler is writing, stays: it logs every attempt)."""
STAGED = ".hydra-overwrite"
"""Where Hydra writes the config of an ``overwrite=true`` run into a directory holding a run (``start_over``
moves it to ``.hydra``), so that a job failing before its first round leaves the old run's config with its records."""
FAILED_ATTEMPT = "failed_attempt.json"
"""The summary of a run that completed no round in a directory holding a completed run, which it leaves as it
was (``record_unfinished``); the next run started there removes it."""
OVERWRITTEN = ".overwritten"
"""Where ``overwrite=true`` keeps the old run's records (and ``.hydra``) until the new run completes a round."""
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


def _run_files(path: Path) -> list[Path]:
    """The records (``RUN_FILES``) of the run in ``path`` and of the runs (replicas) in its subdirectories."""
    return sorted(found for name in RUN_FILES for found in path.glob(f"**/{name}")
                  if OVERWRITTEN not in found.relative_to(path).parts)


def start_over(path: str | Path) -> None:
    """``overwrite=true``, once the new run in ``path`` is about to write its first record: move the old
    run's records and ``.hydra`` to ``OVERWRITTEN`` (``kept_new_run`` drops them after the new run's first
    round, ``record_unfinished`` puts them back before it) and the new run's config (``STAGED``) in place
    of ``.hydra``. Records there beside an ``OVERWRITTEN`` are an earlier attempt's that completed no round:
    they go."""
    path, kept = Path(path), Path(path) / OVERWRITTEN
    staged, hydra = path / STAGED, path / ".hydra"
    fresh = not kept.exists()
    for found in _run_files(path):
        _move_or_remove(found, kept / found.relative_to(path) if fresh else None)
    if staged.is_dir():
        _move_or_remove(hydra, kept / ".hydra" if fresh else None)
        staged.rename(hydra)


def kept_new_run(path: str | Path) -> None:
    """The new run of ``overwrite=true`` in ``path`` completed a round: the old run's records go."""
    shutil.rmtree(Path(path) / OVERWRITTEN, ignore_errors=True)


def restore_overwritten(path: str | Path) -> None:
    """The new run of ``overwrite=true`` in ``path`` ended before completing a round: its records and config go
    and the old run's come back (nothing when none were kept)."""
    path, kept = Path(path), Path(path) / OVERWRITTEN
    if not kept.is_dir():
        return
    for found in _run_files(path):
        found.unlink()
    if (kept / ".hydra").is_dir():
        shutil.rmtree(path / ".hydra", ignore_errors=True)
    for found in sorted(kept.rglob("*"), key=lambda p: len(p.parts)):
        target = path / found.relative_to(kept)
        if found.is_file() or not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            found.rename(target)
    shutil.rmtree(kept)


def record_unfinished(path: str | Path, summary: dict[str, Any]) -> None:
    """Record ``summary``, the end of a run in ``path`` that completed no round (failed, stopped, killed): the
    records ``overwrite=true`` moved aside come back, and beside a completed run's records it goes to
    ``FAILED_ATTEMPT`` (a failed attempt never replaces a completed record), else to ``summary.json``."""
    restore_overwritten(path)
    try:
        completed = json.loads((Path(path) / "summary.json").read_text()).get("status") == "completed"
    except (OSError, ValueError):
        completed = False
    if completed:
        atomic_write_text(Path(path) / FAILED_ATTEMPT, json.dumps(summary, indent=2) + "\n")
    else:
        RunRecorder(path).write_summary(summary)


def _move_or_remove(source: Path, target: Path | None) -> None:
    """Move ``source`` (a file or folder) to ``target``, or remove it when ``target`` is ``None``."""
    if target is None and source.is_dir():
        shutil.rmtree(source)
    elif target is None:
        source.unlink(missing_ok=True)
    elif source.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        source.rename(target)


def refusal(path: str | Path) -> str:
    """The error for a fixed directory that already holds a run and a command that said nothing."""
    return (f"{path} already holds a run; pass resume=auto to continue it (a completed run is left as it is) "
            "or overwrite=true to start it over")


def quoted_override(key: str, value: str) -> str:
    """``key='value'`` in Hydra's override grammar: any character (``=``, ``,``, spaces, quotes of a
    sweep job's directory name) taken literally."""
    return "{}='{}'".format(key, value.replace("'", "\\'"))


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
            with read_write(config.hydra), open_dict(config.hydra):  # each job's config is recomposed
                config.hydra.overrides.hydra.append(quoted_override("hydra.sweep.dir", config.hydra.sweep.dir))
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
