"""The end of a ``-m`` sweep: its failed jobs, each with the error its ``summary.json`` recorded.

``FailedJobsReport`` is a Hydra callback (``hydra.callbacks`` in ``conf/config.yaml``): after the
last job it reads the summaries under the sweep directory, prints one line per failed job (its
directory, error type, message and round) and ends the sweep with exit status 1 when any failed.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback


def failed_jobs(sweep_dir: str | Path) -> list[str]:
    """One line per run under ``sweep_dir`` whose ``summary.json`` says ``failed``."""
    lines = []
    for path in sorted(Path(sweep_dir).glob("**/summary.json")):
        summary = json.loads(path.read_text())
        if summary.get("status") != "failed":
            continue
        where = f"round {summary['error_round']}" if summary.get("error_round") else "before the first round"
        error = f"{summary.get('error_type', 'error')}: {summary.get('error', 'no message recorded')}"
        lines.append(f"{path.parent.relative_to(sweep_dir)}: {error} ({where})")
    return lines


class FailedJobsReport(Callback):
    """Lists the sweep's failed jobs after its last job (see the module docstring)."""

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        lines = failed_jobs(config.hydra.sweep.dir)
        if not lines:
            return
        print(f"{len(lines)} failed job(s) in {config.hydra.sweep.dir}:", file=sys.stderr)
        for line in lines:
            print(f"  {line}", file=sys.stderr)
        sys.exit(1)
