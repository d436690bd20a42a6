"""A toy's run record, read by ``make_figures`` like a training run's (``figures/`` reads records only).

A record is a directory ``<runs>/seed<seed>/`` with ``summary.json`` (``status: completed``, ``toy``:
its name, ``params``: the setting and the numbers the figure quotes) and one CSV per table. ``TOYS``
names each toy, the run tree its figures declare and the function that computes it; ``scripts/toys.py``
writes them.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from fedbn_bench.records.run_records import RunRecorder
from fedbn_bench.toy import cos_bn, hbn_clusters

Tables = dict[str, list[dict[str, Any]]]


@dataclass(frozen=True)
class Toy:
    """A toy: its run tree (relative to the repository) and ``make(seed) -> (params, tables)``."""

    runs: str
    make: Callable[[int], tuple[dict[str, Any], Tables]]


def make_clusters(seed: int) -> tuple[dict[str, Any], Tables]:
    toy = hbn_clusters.run_clusters(seed)
    return hbn_clusters.params(seed, toy), {"points": hbn_clusters.rows(toy)}


def make_cos(seed: int) -> tuple[dict[str, Any], Tables]:
    toy = cos_bn.run_cos(seed)
    return cos_bn.params(seed, toy), {"curves": toy.curves, "surface": cos_bn.surface_rows(toy)}


TOYS: dict[str, Toy] = {
    "hbn_clusters": Toy("results/hbn/fig2/runs", make_clusters),
    "fedbn_cos": Toy("results/fedbn/cos_toy/runs", make_cos),
}
"""HBN Fig. 2 (``hbn_clusters``); FedBN Figs. 1 and 2 (``fedbn_cos``, one record for both)."""


def write_table(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in row.items()} for row in rows)


def write_record(root: Path, name: str, seed: int = 0) -> Path:
    """Compute toy ``name`` with ``seed`` and write its record under ``root / TOYS[name].runs``."""
    toy = TOYS[name]
    params, tables = toy.make(seed)
    run_dir = root / toy.runs / f"seed{seed}"
    recorder = RunRecorder(run_dir)
    for table, rows in tables.items():
        write_table(run_dir / f"{table}.csv", rows)
    recorder.write_summary({"status": "completed", "toy": name, "params": params})
    return run_dir
