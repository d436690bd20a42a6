"""The run-output contract: ``metrics.csv``, ``client_metrics.csv``, ``summary.json`` and
``partition.csv`` in the run dir.

Figure and table scripts read only these files. Each is written atomically (``atomic.py``):
``metrics.csv`` is rewritten with every evaluation's row, so a run that diverges, is interrupted,
crashes or meets a full disk keeps every row it produced, and ``summary.json`` is whole or absent.
"""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from fedbn_bench.records.atomic import atomic_write_text

METRIC_COLUMNS = ("round", "test_acc", "test_loss", "train_loss", "lr", "wall_s")
CLIENT_COLUMNS = ("round", "client", "metric", "value")
"""``client_metrics.csv``: the per-client values of every evaluation in long form, one row each."""
STATUSES = ("running", "completed", "diverged", "interrupted", "failed")


class RunRecorder:
    """Writes the run records of one simulation into ``run_dir``."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = self.run_dir / "metrics.csv"
        self.summary_path = self.run_dir / "summary.json"
        self.client_metrics_path = self.run_dir / "client_metrics.csv"
        self._columns: list[str] | None = None
        self._rows: list[list[Any]] = []
        self._client_rows: list[list[Any]] = []

    def write_partition(self, table: pd.DataFrame) -> None:
        atomic_write_text(self.run_dir / "partition.csv", table.to_csv())

    def append_metrics(self, row: dict[str, Any]) -> None:
        """Add one evaluation row (the file is rewritten atomically with it); the first row fixes
        the columns (contract columns first)."""
        if self._columns is None:
            self._columns = [*METRIC_COLUMNS, *(k for k in row if k not in METRIC_COLUMNS)]
        self._rows.append([format_value(row.get(k)) for k in self._columns])
        text = io.StringIO()
        csv.writer(text).writerows([self._columns, *self._rows])
        atomic_write_text(self.metrics_path, text.getvalue())

    def append_client_metrics(self, round_number: int, values: dict[str, dict[int, float]]) -> None:
        """Add one evaluation's per-client values (``{metric: {client: value}}``) to
        ``client_metrics.csv`` (rewritten atomically; not written while no evaluation has any)."""
        rows = [[round_number, client, metric, format_value(value)]
                for metric, per_client in values.items() for client, value in per_client.items()]
        if not rows:
            return
        self._client_rows.extend(rows)
        self._write_client_metrics()

    def keep_client_metrics(self, rounds: int) -> None:
        """Keep the per-client rows of the first ``rounds`` rounds (a resumed run records the later
        ones again)."""
        if not self.client_metrics_path.exists():
            return
        with self.client_metrics_path.open() as f:
            self._client_rows = [row for row in list(csv.reader(f))[1:] if int(row[0]) <= rounds]
        self.client_metrics_path.unlink()
        if self._client_rows:
            self._write_client_metrics()

    def _write_client_metrics(self) -> None:
        text = io.StringIO()
        csv.writer(text).writerows([CLIENT_COLUMNS, *self._client_rows])
        atomic_write_text(self.client_metrics_path, text.getvalue())

    def write_summary(self, summary: dict[str, Any]) -> None:
        if summary.get("status") not in STATUSES:
            raise ValueError(f"summary status must be one of {STATUSES}")
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in summary.items()}
        atomic_write_text(self.summary_path, json.dumps(clean, indent=2) + "\n")


def format_value(value: Any) -> Any:
    """A value as ``metrics.csv`` holds it: a float to 6 significant digits, ``None`` empty."""
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else value


def summary_line(summary: dict[str, Any], run_dir: str | Path) -> str:
    """The one line a run ends with: status, final and best accuracy, rounds, the backend that
    trained (``engine``), run directory; a diverged run adds the round it diverged at and what to try."""
    def pct(value: Any) -> str:
        return "n/a" if value is None else f"{100 * value:.2f}%"

    line = (f"{summary['status']}: final acc {pct(summary.get('final_test_acc'))}, "
            f"best {pct(summary.get('best_test_acc'))}, rounds {summary['rounds_completed']}, "
            + (f"engine {summary['engine']}, " if "engine" in summary else "") + f"run dir {run_dir}")
    if summary["status"] == "diverged":
        line += (f"\n  the training loss became non-finite in round {summary['rounds_completed']}; try a lower "
                 "`lr`, gradient clipping (`algo.clip_grad_norm=10`) or less momentum (`algo.momentum`)")
    return line
