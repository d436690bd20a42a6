"""The run-output contract: ``metrics.csv``, ``summary.json`` and ``partition.csv`` in the run dir.

Figure and table scripts read only these files. ``metrics.csv`` is appended and flushed after each
evaluation, so a run that diverges, is interrupted or crashes keeps every row it produced.
"""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

METRIC_COLUMNS = ("round", "test_acc", "test_loss", "train_loss", "lr", "wall_s")
STATUSES = ("running", "completed", "diverged", "interrupted", "failed")


class RunRecorder:
    """Writes the run records of one simulation into ``run_dir``."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = self.run_dir / "metrics.csv"
        self.summary_path = self.run_dir / "summary.json"
        self._columns: list[str] | None = None

    def write_partition(self, table: pd.DataFrame) -> None:
        table.to_csv(self.run_dir / "partition.csv")

    def append_metrics(self, row: dict[str, Any]) -> None:
        """Append one evaluation row; the first row fixes the columns (contract columns first)."""
        if self._columns is None:
            extra = [k for k in row if k not in METRIC_COLUMNS]
            self._columns = [*METRIC_COLUMNS, *extra]
            with self.metrics_path.open("w", newline="") as f:
                csv.writer(f).writerow(self._columns)
        with self.metrics_path.open("a", newline="") as f:
            csv.writer(f).writerow([_format(row.get(k)) for k in self._columns])

    def write_summary(self, summary: dict[str, Any]) -> None:
        if summary.get("status") not in STATUSES:
            raise ValueError(f"summary status must be one of {STATUSES}")
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in summary.items()}
        self.summary_path.write_text(json.dumps(clean, indent=2) + "\n")


def _format(value: Any) -> Any:
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
