"""Replays of committed runs: a run's own config re-run at a later commit for its first evaluations, compared with
its committed ``metrics.csv`` rows (issue 57 §1). This module compares and keeps the results; the re-run itself is
``fedbn_bench/replay_runner.py``.

A replay reads **reproduced** when every compared value of the first ``evals`` rows is equal as ``metrics.csv``
writes it (6 significant digits, ``run_records.format_value``) and the partition is the same; **drifted** when one
is not (the first differing evaluation: its round, the column that moved most and by how much); **not comparable**
when the run cannot be replayed as it ran (a GPU run replayed on a CPU, a config that no longer composes, a
different CPU whose result differs). The float32 noise allowed is none: the same config, seed, thread count,
engine, torch and CPU family give the same bits (measured: ``docs/claims.md``), so any difference on the same
machine is the code's. Timing columns (:data:`TIMING`) are not compared; a column only one side has is listed.

One JSON file a run: ``results/replay/<run directory below results/>.json`` (:func:`record_path`).
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from fedbn_bench.records.atomic import atomic_write_text
from fedbn_bench.records.run_records import format_value

REPLAYS = Path("results/replay")
"""Where the replay results lie, relative to the repository."""
REPRODUCED, DRIFTED, NOT_COMPARABLE = "reproduced", "drifted", "not comparable"
TIMING = ("wall_s",)
"""Columns that measure time, not the run's numbers."""


@dataclass(frozen=True)
class Replay:
    """What the replay of one committed run found."""

    run: str
    """The run directory, relative to the repository."""
    status: str
    detail: str
    """The first difference (drifted), why not (not comparable), or what was compared (reproduced)."""
    evals: int
    """Evaluations compared."""
    code_commit: Optional[str]
    code_dirty: bool = False
    first_round: Optional[int] = None
    """The round of the first differing evaluation (drifted)."""
    run_commit: Optional[str] = None
    """The commit that added the run's records (from git, ``results/claims/declared.json``), where known."""
    run_code: Optional[str] = None
    """The ``code_commit`` the replayed run's summary records (``None``: it predates the record), so that a replay
    of a run since re-run over is known to be of the old one."""
    setting: Mapping[str, Any] = field(default_factory=dict)
    """How it was replayed: threads, engine, torch, cpu; and the seconds it took."""

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> "Replay":
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def committed_rows(run_dir: Path) -> list[dict[str, str]]:
    """The rows of ``run_dir/metrics.csv`` as written (strings)."""
    with (run_dir / "metrics.csv").open() as f:
        return list(csv.DictReader(f))


def written(row: Mapping[str, Any]) -> dict[str, str]:
    """A metric row as ``metrics.csv`` holds it (``format_value``, as strings)."""
    return {k: str(format_value(v)) for k, v in row.items()}


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _distance(old: str, new: str) -> float:
    gap = abs(_number(old) - _number(new))
    return math.inf if math.isnan(gap) else gap


def first_difference(committed: list[Mapping[str, str]], replayed: list[Mapping[str, str]],
                     evals: int) -> Optional[tuple[int, str, str, str]]:
    """``(round, column, committed, replayed)`` of the first of the first ``evals`` committed evaluations whose values
    differ (``test_acc`` where it moved, else the column that moved most), or ``None`` when they all agree. Rows pair
    by order; one the replay lacks (it diverged sooner) differs in ``round``."""
    for index, old in enumerate(committed[:evals]):
        if index >= len(replayed):
            return int(_number(old["round"])), "round", old["round"], "none"
        new = replayed[index]
        columns = [c for c in old if c in new and c not in TIMING]
        moved = [c for c in columns if old[c] != new[c]]
        if moved:
            column = "test_acc" if "test_acc" in moved else max(moved, key=lambda c: _distance(old[c], new[c]))
            return int(_number(old["round"])), column, old[column], new[column]
    return None


def compare(committed: list[Mapping[str, str]], replayed: list[Mapping[str, str]], evals: int,
            same_partition: bool = True) -> tuple[str, str, Optional[int]]:
    """``(status, detail, first differing round)`` of a replay (module docstring)."""
    evals = min(evals, len(committed))
    if evals == 0:
        return NOT_COMPARABLE, "the committed run has no evaluation", None
    if not same_partition:
        return DRIFTED, "partition.csv differs: the clients hold other samples", 0
    difference = first_difference(committed, replayed, evals)
    only = sorted(set(committed[0]) ^ set(replayed[0])) if replayed else []
    extra = f"; columns on one side only: {', '.join(only)}" if only else ""
    if difference is None:
        rounds = ", ".join(committed[i]["round"] for i in range(evals))
        return REPRODUCED, f"equal at round{'s' if evals > 1 else ''} {rounds}{extra}", None
    round_number, column, old, new = difference
    delta = _number(new) - _number(old)
    moved = f" ({delta:+.4g})" if not math.isnan(delta) else ""
    return DRIFTED, f"round {round_number}: {column} {old} committed, {new} now{moved}{extra}", round_number


def record_path(repo: Path, run: str) -> Path:
    """Where the replay result of ``run`` (relative to the repository) is kept."""
    return repo / REPLAYS / f"{run.removeprefix('results/')}.json"


def write_replay(repo: Path, replay: Replay) -> Path:
    path = record_path(repo, replay.run)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(asdict(replay), indent=2) + "\n")
    return path


def load_replays(repo: Path, runs: Optional[Iterable[str]] = None) -> dict[str, Replay]:
    """The replay results kept under ``repo`` (of ``runs`` only, when given), by run directory."""
    if runs is not None:
        paths = [record_path(repo, r) for r in runs]
    else:
        paths = sorted((repo / REPLAYS).rglob("*.json")) if (repo / REPLAYS).is_dir() else []
    found = [Replay.of(json.loads(p.read_text())) for p in paths if p.is_file()]
    return {r.run: r for r in found}
