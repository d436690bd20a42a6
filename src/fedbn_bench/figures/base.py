"""What recipes share: a figure's declaration (:class:`Figure`), the job a recipe gets
(:class:`Job`: the runs, where to write, what to report), the recipe registry, the paper-numbers
files, and small formatting helpers.

Paper numbers (``conf/experiment/<paper>/<table>_paper.csv``), one format for every table: lines
starting with ``#`` are comments (cite the table and say what the columns mean); then a CSV header
whose first two columns are ``method`` (the value of the declaration's row override, e.g. the
``experiment/fedrbn/method`` choice or the norm) and ``label`` (how the row is printed), then any
selector columns (e.g. ``setting``: a declaration picks its rows with ``paper_where``) and the
value columns (numbers, in the paper's unit, usually %). One row per method (per selector value).
"""
from __future__ import annotations

import csv
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from omegaconf import OmegaConf

from fedbn_bench.records.reader import RunRecord, read_runs

COMPLETED = "completed"


@dataclass(frozen=True)
class Figure:
    """One figure or table, declared by data (``catalog/<paper>.py``). Paths are relative to the results
    root's parent (the repository: ``results/...``), ``paper`` to ``conf/experiment``."""

    id: str
    """``<paper>/<name>``: the command-line name."""
    recipe: str
    """The registered recipe that draws it (``recipes/<recipe>.py``)."""
    title: str = ""
    preset: Optional[str] = None
    """``conf/experiment/<preset>.yaml`` that produces its runs (default: ``id``)."""
    runs: Optional[str] = None
    """Run directory tree (default: the preset's ``hydra.sweep.dir``)."""
    out: Optional[str] = None
    """Output directory (default: ``results/<paper>``)."""
    md: Optional[str] = None
    """Markdown file name (default: ``<name>.md``)."""
    image: Optional[str] = None
    """Image file stem, written as ``.png`` and ``.pdf`` (default: ``<name>``)."""
    paper: Optional[str] = None
    """Paper-numbers CSV under ``conf/experiment`` (module docstring: the format)."""
    paper_where: Mapping[str, str] = field(default_factory=dict)
    """Selector columns of the paper file and the value this figure uses (``{"setting": "digits_20"}``)."""
    rows: Optional[str] = None
    """The override (or, prefixed with ``cfg:``, the config key) whose value names a run's row."""
    metric: Any = None
    """What is measured: a metric name or a mapping (recipe-specific, see each recipe)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Anything else the recipe reads (its docstring lists them)."""

    @property
    def paper_name(self) -> str:
        return self.id.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.id.split("/", 1)[1]


@dataclass
class Job:
    """What a recipe gets: the declaration, its runs, and where to write."""

    figure: Figure
    runs_dir: Path
    out: Path
    conf: Path
    runs: list[RunRecord]
    problems: list[str] = field(default_factory=list)
    """Missing or failed runs, named (the CLI prints them on stderr; the recipe also writes them into the .md)."""
    written: list[Path] = field(default_factory=list)

    @property
    def md_path(self) -> Path:
        return self.out / (self.figure.md or f"{self.figure.name}.md")

    @property
    def image_stem(self) -> Path:
        return self.out / (self.figure.image or self.figure.name)

    def paper_rows(self) -> dict[str, dict[str, str]]:
        """The paper's rows of this figure, by method, in the file's order (empty without a file)."""
        if not self.figure.paper:
            return {}
        return read_paper(self.conf / "experiment" / self.figure.paper, self.figure.paper_where)

    def write_md(self, text: str) -> None:
        self.md_path.write_text(text)
        self.written.append(self.md_path)

    def save(self, fig, formats: tuple[str, ...] = ("png", "pdf"), **kwargs) -> None:
        """``fig`` as ``<image>.png`` and ``.pdf`` (PDF without a creation date: reproducible bytes)."""
        import matplotlib.pyplot as plt

        for ext in formats:
            path = self.image_stem.with_suffix(f".{ext}")
            metadata = {"CreationDate": None} if ext == "pdf" else None
            fig.savefig(path, dpi=120, metadata=metadata, **kwargs)
            self.written.append(path)
        plt.close(fig)

    def problem(self, text: str) -> str:
        self.problems.append(text)
        return text


Recipe = Callable[[Job], None]
RECIPES: dict[str, Recipe] = {}


def recipe(name: str) -> Callable[[Recipe], Recipe]:
    """Register a recipe under ``name`` (the ``recipe`` of a declaration)."""
    def register(fn: Recipe) -> Recipe:
        RECIPES[name] = fn
        return fn
    return register


def read_paper(path: Path, where: Mapping[str, str] | None = None) -> dict[str, dict[str, str]]:
    """The rows of a paper-numbers CSV (``#`` lines are comments) matching ``where``, by method."""
    with Path(path).open() as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return {r["method"]: r for r in rows if all(r.get(k) == v for k, v in (where or {}).items())}


def preset_sweep_dir(conf: Path, preset: str) -> Optional[str]:
    """``hydra.sweep.dir`` of ``conf/experiment/<preset>.yaml`` (``None`` without one)."""
    path = conf / "experiment" / f"{preset}.yaml"
    if not path.exists():
        return None
    return OmegaConf.select(OmegaConf.load(path), "hydra.sweep.dir", default=None)


def row_key(run: RunRecord, rows: Optional[str]) -> Optional[str]:
    """The row a run belongs to: the value of the override ``rows``, or of the config key after ``cfg:``."""
    if rows is None:
        return None
    if rows.startswith("cfg:"):
        value = run.get(rows[4:])
        return None if value is None else str(value)
    return run.override(rows)


def matching_runs(runs: list[RunRecord], where: Mapping[str, Any]) -> list[RunRecord]:
    """The runs whose value of each ``where`` key (an override, or ``cfg:<key>``) equals the given value as text."""
    want = {k: str(v) for k, v in where.items()}
    return [r for r in runs if all(row_key(r, k) == v for k, v in want.items())]


def load_runs(runs_dir: Path) -> list[RunRecord]:
    return read_runs(runs_dir) if runs_dir.exists() else []


def mean_std(values: list[float]) -> tuple[Optional[float], Optional[float]]:
    """Mean and sample standard deviation (ddof = 1; 0 for one value; ``None`` for none)."""
    if not values:
        return None, None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def number(value: Any) -> Optional[float]:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def measure(run: RunRecord, source: str) -> Optional[float]:
    """The value of ``source`` in ``run``: ``summary:<key>``, or of a column ``final:``, ``first:``, ``best:``
    (its largest value), ``mean:`` (over the evaluations), ``rises:`` (the sum of its increases between
    consecutive evaluations, ``Σ max(0, v[t+1] − v[t])``: 0 for a curve that never goes up, FedBN Fig. 3's
    "smoother") or ``reach:<column><=<level>`` (the first round at which the column is at or below the level,
    ``None`` while it never is: FedBN Fig. 9's steps to a training loss); a column's NaN cells (no value yet)
    are skipped."""
    kind, _, key = source.partition(":")
    if kind == "summary":
        return number(run.summary.get(key))
    if kind == "reach":
        return first_round_at_most(run, source)
    _, values = run.curve(key)
    values = [v for v in values if v is not None and not math.isnan(v)]  # NaN: no value yet (a change since none)
    if not values:
        return None
    if kind == "final":
        return values[-1]
    if kind == "first":
        return values[0]
    if kind == "best":
        return max(values)
    if kind == "mean":
        return sum(values) / len(values)
    if kind == "rises":
        return sum(max(0.0, b - a) for a, b in zip(values, values[1:]))
    raise ValueError(f"metric source {source!r}: expected summary:, final:, first:, best:, mean:, rises: or reach:")


def first_round_at_most(run: RunRecord, source: str) -> Optional[float]:
    """The first round at which ``reach:<column><=<level>``'s column is at or below its level (``None``: never)."""
    column, sep, level = source.partition(":")[2].partition("<=")
    if not sep:
        raise ValueError(f"metric source {source!r}: expected reach:<column><=<level>, e.g. reach:train_loss<=0.1")
    rounds, values = run.curve(column)
    return next((float(r) for r, v in zip(rounds, values) if not math.isnan(v) and v <= float(level)), None)


def cell(value: Optional[float], digits: int = 2, sign: bool = False) -> str:
    """A number for a table (``–`` for none)."""
    if value is None:
        return "–"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def md_table(header: list[str], rows: list[list[str]], align: Optional[list[str]] = None) -> list[str]:
    align = align or ["---"] * len(header)
    return ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|",
            *("| " + " | ".join(r) + " |" for r in rows)]


def warn(text: str) -> None:
    print(text, file=sys.stderr)
