"""Table and figure of FBN Fig. 3a (final test accuracy vs gamma-similarity) from a sweep's runs.

Reads only each run's records under ``--runs``: ``summary.json`` (status, final accuracy),
``metrics.csv`` (the last evaluated round) and ``.hydra/config.yaml`` (what was run). A run's
method is ``centralized`` when ``algo.name`` is ``centralized``, otherwise its norm (``bn`` → naive
BN, ``fixbn``, ``fbn``). Nothing is dropped silently: a run that did not complete (diverged,
failed, interrupted), a run directory without ``summary.json``, and a (method, gamma, seed) of
the sweep's grid with no run are named in the table's cell and listed under it. Writes into
``--out``:

* ``table.csv`` — ``method, gamma, mean_acc, std_acc, runs, not_completed`` (accuracy in %, over
  the completed runs; std over seeds, ddof=1),
* ``table.md`` — the setting (from the runs' configs), the method × gamma table of ``mean ± std``
  beside the paper's γ = 0 numbers (FBN §4 "Results", CIFAR-10), and the runs left out,
* ``fig3a.png`` — accuracy vs gamma, one line per method with error bars.

Usage: ``python scripts/fbn_fig3a_table.py [--runs results/fbn_fig3a/runs] [--out results/fbn_fig3a]
[--note TEXT]`` (``--note``: a line under the title, e.g. why this setting).
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

METHODS = {"bn": "Naive BN", "fixbn": "FixBN", "fbn": "FBN", "centralized": "Centralized"}
PAPER_GAMMA0 = {"bn": "≈ 17 (best case)", "fixbn": "≈ 75 (max)", "fbn": "≈ 80 (max)", "centralized": "≈ 80 (max)"}
"""FBN §4 "Results" (fbn_federated_batchnorm.txt), CIFAR-10, DSGD, 3000 steps, gamma = 0: the paper's
text, not a run of this project (for gamma >= 0.3 it reports all methods at about 80%)."""


@dataclass
class Run:
    """One run directory: its method, gamma, seed, status and final accuracy (%)."""

    path: Path
    method: str
    gamma: float
    seed: int
    status: str
    acc: Optional[float]
    last_round: Optional[int]
    cfg: DictConfig


def method_of(cfg: DictConfig) -> str:
    return "centralized" if cfg.algo.name == "centralized" else cfg.norm.name


def last_round(run_dir: Path) -> Optional[int]:
    """The last evaluated round in ``metrics.csv`` (``None`` without one)."""
    path = run_dir / "metrics.csv"
    if not path.is_file():
        return None
    rows = list(csv.DictReader(path.open()))
    return int(rows[-1]["round"]) if rows else None


def read_run(run_dir: Path) -> Optional[Run]:
    """The run in ``run_dir``, or ``None`` when it has no config (not a run of this project)."""
    config = run_dir / ".hydra" / "config.yaml"
    if not config.is_file():
        return None
    cfg = OmegaConf.load(config)
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {"status": "no summary.json"}
    status = summary.get("status", "no status")
    acc = 100 * summary["final_test_acc"] if status == "completed" else None
    return Run(run_dir, method_of(cfg), float(cfg.partition.gamma), int(cfg.seed), status, acc,
               last_round(run_dir), cfg)


def collect(runs: Path) -> list[Run]:
    found = (read_run(p.parent.parent) for p in sorted(runs.rglob(".hydra/config.yaml")))
    return [r for r in found if r is not None]


def missing_cells(runs: list[Run]) -> list[tuple[str, float, int]]:
    """(method, gamma, seed) of the grid spanned by the runs that has no run."""
    have = {(r.method, r.gamma, r.seed) for r in runs}
    methods, gammas, seeds = ({getattr(r, k) for r in runs} for k in ("method", "gamma", "seed"))
    return sorted((m, g, s) for m in methods for g in gammas for s in seeds if (m, g, s) not in have)


def summarize(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def setting(runs: list[Run]) -> str:
    """One line describing what was run, from the configs (values that differ are listed)."""
    def values(get) -> str:
        return "/".join(sorted({str(get(r.cfg)) for r in runs}))

    federated = [r for r in runs if r.method != "centralized"] or runs
    schedule = values(lambda c: f"piecewise {list(c.algo.schedule.rates)} from rounds "
                                f"{[0, *(int(m) for m in c.algo.schedule.milestones)]}"
                      if c.algo.schedule.name == "piecewise" else f"{c.algo.schedule.name} {c.algo.lr}")
    client_momentum = "/".join(sorted({str(r.cfg.algo.get("client_momentum")) for r in federated}))
    return (f"Setting (from the runs' configs): dataset {values(lambda c: c.dataset.name)}, model "
            f"{values(lambda c: c.model.name)}, {values(lambda c: c.partition.name)} partition, "
            f"{values(lambda c: c.num_clients)} clients ({values(lambda c: c.clients_per_round)} per round), "
            f"{', '.join(sorted({r.cfg.algo.name for r in federated}))} (client momentum {client_momentum}), "
            f"batch {values(lambda c: c.batch_size)} per client, {values(lambda c: c.rounds)} rounds, "
            f"lr {schedule}, seeds {values(lambda c: c.seed)}.")


def cell(runs: list[Run]) -> str:
    done = [r.acc for r in runs if r.acc is not None]
    mean, std = summarize(done) if done else (0.0, 0.0)
    text = "" if not done else f"{mean:.1f}" if len(done) == 1 else f"{mean:.1f} ± {std:.1f} ({len(done)} seeds)"
    others = [f"{r.status} (seed {r.seed}, round {r.last_round})" for r in runs if r.acc is None]
    return "; ".join(([text] if text else []) + others) or "–"


def write_tables(runs: list[Run], out: Path, note: str) -> None:
    by_cell: dict[tuple[str, float], list[Run]] = defaultdict(list)
    for r in runs:
        by_cell[r.method, r.gamma].append(r)
    methods = [m for m in METHODS if any(r.method == m for r in runs)]
    gammas = sorted({r.gamma for r in runs})
    with open(out / "table.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["method", "gamma", "mean_acc", "std_acc", "runs", "not_completed"])
        for m in methods:
            for g in gammas:
                group = by_cell.get((m, g), [])
                done = [r.acc for r in group if r.acc is not None]
                mean, std = summarize(done) if done else (float("nan"), float("nan"))
                writer.writerow([m, g, f"{mean:.2f}", f"{std:.2f}", len(done), len(group) - len(done)])
    header = "| method | " + " | ".join(f"γ = {g:g}" for g in gammas) + " | paper, γ = 0 (CIFAR-10) |"
    lines = [header, "|---" * (len(gammas) + 2) + "|"]
    for m in methods:
        lines.append(f"| {METHODS[m]} | " + " | ".join(cell(by_cell.get((m, g), [])) for g in gammas)
                     + f" | {PAPER_GAMMA0[m]} |")
    left_out = [f"- {r.path.name}: {r.status} (last evaluated round {r.last_round})" for r in runs if r.acc is None]
    left_out += [f"- {METHODS[m]}, γ = {g:g}, seed {s}: no run" for m, g, s in missing_cells(runs)]
    text = ["# FBN Fig. 3a: final test accuracy (%) vs γ-similarity", ""]
    text += [note, ""] if note else []
    text += [setting(runs), "",
             "Ours: final test accuracy of the completed runs (mean ± std over seeds where there are several). Paper: FBN §4 \"Results\" "
             "(text; for γ ≥ 0.3 it reports all methods at about 80%).", "", *lines, "",
             "Runs left out of the means: " + ("none." if not left_out else ""), *left_out]
    (out / "table.md").write_text("\n".join(text) + "\n")


def plot(runs: list[Run], out: Path) -> None:
    gammas = sorted({r.gamma for r in runs})
    fig, ax = plt.subplots(figsize=(6, 4))
    for k, (m, marker, style) in enumerate(zip(METHODS, "os^D", ["-", "--", "-.", ":"])):
        points = []
        for i, g in enumerate(gammas):
            done = [r.acc for r in runs if r.method == m and r.gamma == g and r.acc is not None]
            if done:
                points.append((i + 0.04 * (k - 1.5), *summarize(done)))  # offset: coinciding lines stay visible
        if points:
            xs, means, stds = zip(*points)
            ax.errorbar(xs, means, yerr=stds, marker=marker, linestyle=style, capsize=3, label=METHODS[m])
    ax.set_xticks(range(len(gammas)), [f"{g:g}" for g in gammas])
    ax.set_xlabel("γ-similarity (0: extreme non-iid, 1: iid)")
    ax.set_ylabel("final test accuracy (%)")
    ax.set_title(f"{'/'.join(sorted({r.cfg.dataset.name for r in runs}))}, "
                 f"{'/'.join(sorted({str(r.cfg.rounds) for r in runs}))} rounds")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1))
    fig.savefig(out / "fig3a.png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("results/fbn_fig3a/runs"))
    parser.add_argument("--out", type=Path, default=Path("results/fbn_fig3a"))
    parser.add_argument("--note", default="", help="a line under the title (e.g. why this setting)")
    args = parser.parse_args()
    runs = collect(args.runs)
    if not runs:
        raise SystemExit(f"no run (.hydra/config.yaml) under {args.runs}")
    args.out.mkdir(parents=True, exist_ok=True)
    write_tables(runs, args.out, args.note)
    plot(runs, args.out)
    print((args.out / "table.md").read_text())


if __name__ == "__main__":
    main()
