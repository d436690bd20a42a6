"""The end of a ``-m`` sweep: every job's final status, those that did not complete with what their records say.

``FailedJobsReport`` is a Hydra callback (``hydra.callbacks`` in ``conf/config.yaml``): after the
last job it reads the summaries under the sweep directory, lists the jobs that completed (a line
each, with their rounds), and prints one line per job that failed
(its directory, error type, message and round), diverged, was interrupted, has no ``summary.json``
(its process was killed, or its disk filled) or an unreadable one (the file is named), or failed before its
first round beside a completed run (``FAILED_ATTEMPT``); it then ends
the sweep with exit status 1. A run directory under the sweep that another live process holds
(``run_lock``: a second sweep into the same directory, e.g. the claims queue's jobs) is listed as still
running and is not a failure of this sweep.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from fedbn_bench.records.run_dirs import FAILED_ATTEMPT, OVERWRITTEN
from fedbn_bench.records.run_lock import live_holder


def job_dirs(sweep_dir: str | Path) -> list[Path]:
    """The run directories of a sweep: each directory with ``.hydra`` or ``summary.json``, a
    ``replicas=k`` job's ``seed_<s>`` directories in place of the job's own."""
    root = Path(sweep_dir)
    dirs = {p.parent for p in root.glob("**/summary.json")} | {p.parent for p in root.glob("**/.hydra")}
    dirs = {d for d in dirs if OVERWRITTEN not in d.relative_to(root).parts}
    return sorted(dirs - {p.parent for p in root.glob("**/replicas.json")} - {root})


def job_lines(sweep_dir: str | Path) -> tuple[list[str], list[str], list[str]]:
    """The runs under ``sweep_dir`` in one pass, a line each: those that completed (with their rounds), those
    another live process holds (naming it), and those that did not complete (see the module docstring)."""
    completed, running, unfinished = [], [], []
    for run_dir in job_dirs(sweep_dir):
        name = run_dir.relative_to(sweep_dir)
        if (problem := job_problem(run_dir)) is None:
            rounds = json.loads((run_dir / "summary.json").read_text())["rounds_completed"]
            completed.append(f"{name}: completed, {rounds} rounds")
        elif (owner := live_holder(run_dir)) is not None:
            running.append(f"{name}: running in {owner}")
        else:
            unfinished.append(f"{name}: {problem}")
    return completed, running, unfinished


def job_problem(run_dir: Path) -> str | None:
    """What went wrong in ``run_dir`` (``None``: it completed)."""
    if (run_dir / FAILED_ATTEMPT).exists():
        return f"{summary_problem(run_dir / FAILED_ATTEMPT)} (the completed run there is left as it was)"
    return summary_problem(run_dir / "summary.json")


def summary_problem(path: Path) -> str | None:
    """What the summary at ``path`` says went wrong (``None``: the run completed)."""
    if not path.exists():
        return "no summary.json (its process was killed or could not write)"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        return f"{path} is unreadable ({type(err).__name__}: {err})"
    status = summary.get("status")
    if status == "completed":
        return None
    if status == "failed":
        where = f"round {summary['error_round']}" if summary.get("error_round") else "before the first round"
        return f"{summary.get('error_type', 'error')}: {summary.get('error', 'no message recorded')} ({where})"
    if status == "interrupted":
        return f"interrupted by {summary.get('stopped_by', 'a signal')} after round {summary.get('rounds_completed')}"
    return f"{status} after round {summary.get('rounds_completed')}"


class FailedJobsReport(Callback):
    """Lists the sweep's jobs that did not complete after its last job (see the module docstring)."""

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        sweep_dir = config.hydra.sweep.dir
        completed, running, lines = job_lines(sweep_dir)
        for heading, listed in ((f"{len(completed)} job(s) completed in {sweep_dir}:", completed),
                                (f"{len(running)} job(s) still running in other processes in {sweep_dir}:", running),
                                (f"{len(lines)} job(s) did not complete in {sweep_dir}:", lines)):
            if listed:
                print(heading, file=sys.stderr)
                for line in listed:
                    print(f"  {line}", file=sys.stderr)
        if lines:
            sys.exit(1)
