"""Reading run records back (the one reader figure and table scripts use): a run directory's
``.hydra/config.yaml`` (or the ``config`` a checkpoint carries), ``summary.json``, ``metrics.csv``
and the per-client values (``client_metrics.csv``, long form; older runs kept them as
``<metric>_<client>`` columns of ``metrics.csv``, read alike by ``client_values``).
A run without ``summary.json`` is reported with status ``no summary``, never dropped."""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from omegaconf import OmegaConf


@dataclass
class RunRecord:
    """One run directory: its resolved config, summary and metric rows (numbers as floats)."""

    path: Path
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    rows: list[dict[str, float]] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)
    client_rows: list[tuple[int, int, str, float]] = field(default_factory=list)
    """``client_metrics.csv``: (round, client, metric, value) per row."""

    def client_values(self, metric: str) -> dict[int, dict[int, float]]:
        """``{round: {client: value}}`` of the per-client ``metric`` (e.g. ``client_acc``), from
        ``client_metrics.csv`` or, in a run recorded before it, the ``<metric>_<client>`` columns."""
        out: dict[int, dict[int, float]] = {}
        for round_number, client, name, value in self.client_rows:
            if name == metric:
                out.setdefault(round_number, {})[client] = value
        if out:
            return out
        prefix = f"{metric}_"
        for row in self.rows:
            wide = {int(k[len(prefix):]): v for k, v in row.items()
                    if k.startswith(prefix) and k[len(prefix):].isdigit() and v is not None}
            if wide:
                out[int(row["round"])] = wide
        return out

    @property
    def status(self) -> str:
        return self.summary.get("status", "no summary")

    @property
    def status_text(self) -> str:
        """The status with, for a failed run, the error its summary recorded (``failed (ValueError:
        ..., round 3)``), as figures and tables name a run they leave out."""
        if self.status != "failed" or "error_type" not in self.summary:
            return self.status
        where = f"round {self.summary['error_round']}" if self.summary.get("error_round") else "before round 1"
        return f"failed ({self.summary['error_type']}: {self.summary.get('error', '')}, {where})"

    def get(self, dotted: str, default: Any = None) -> Any:
        """A config value by dotted key (``"adversarial.at_fraction"``)."""
        node: Any = self.config
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def override(self, key: str) -> Optional[str]:
        """The value of the command-line override ``key`` (``+`` prefixes ignored), e.g. the
        sweep's ``experiment/fedrbn/method``; ``None`` when the run had no such override."""
        for item in self.overrides:
            name, _, value = item.partition("=")
            if name.lstrip("+~") == key:
                return value
        return None

    def curve(self, column: str) -> tuple[list[float], list[float]]:
        """``(rounds, values)`` of ``column`` over the evaluations that have it."""
        pairs = [(row["round"], row[column]) for row in self.rows if row.get(column) is not None]
        return [r for r, _ in pairs], [v for _, v in pairs]


def _number(value: str) -> Optional[float]:
    try:
        return float(value)
    except ValueError:
        return None


def read_run(path: str | Path) -> RunRecord:
    """The records of the run directory ``path``."""
    path = Path(path)
    record = RunRecord(path)
    config = path / ".hydra" / "config.yaml"
    if config.exists():
        record.config = OmegaConf.to_container(OmegaConf.load(config), resolve=False)
    overrides = path / ".hydra" / "overrides.yaml"
    if overrides.exists():
        record.overrides = [str(o) for o in OmegaConf.load(overrides)]
    summary = path / "summary.json"
    if summary.exists():
        try:
            record.summary = json.loads(summary.read_text())
        except ValueError as err:
            raise ValueError(f"{summary} is not valid JSON ({err}): a broken record") from None
    metrics = path / "metrics.csv"
    if metrics.exists():
        with metrics.open() as f:
            record.rows = [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(f)]
    clients = path / "client_metrics.csv"
    if clients.exists():
        with clients.open() as f:
            record.client_rows = [(int(r["round"]), int(r["client"]), r["metric"], float(r["value"]))
                                  for r in csv.DictReader(f)]
    return record


def read_runs(root: str | Path) -> list[RunRecord]:
    """Every run directory under ``root`` (a directory holding ``.hydra`` or ``summary.json``), sorted;
    a ``replicas=k`` directory (``replicas.json``) is not a run: its runs are its ``seed_<s>`` directories."""
    root = Path(root)
    dirs = {p.parent for p in root.rglob("summary.json")} | {p.parent for p in root.rglob(".hydra")}
    dirs -= {p.parent for p in root.rglob("replicas.json")}
    return [read_run(d) for d in sorted(dirs)]
