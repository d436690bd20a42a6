"""``python scripts/make_figures.py <paper>/<id> [--runs DIR] [--out DIR]`` or ``--all``: the
figures and tables of ``catalog/`` from run records only; ``make_figures.py curve --runs DIR``: the
learning curve of any sweep (``sweep_curve.py``).

Prints one line per figure written (its files); missing or failed runs are named on stderr (and in
the figure's .md). ``--all`` draws every declared figure whose runs are present and names the others
as missing. ``--root`` moves the declared ``results/...`` paths under another directory (a copy of
the results tree); the paper-numbers files are always read from ``--conf``.
"""
from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path
from typing import Optional

from fedbn_bench.figures import recipes, sweep_curve  # noqa: F401  (registers the recipes)
from fedbn_bench.figures.base import RECIPES, Figure, Job, load_runs, preset_sweep_dir, warn
from fedbn_bench.figures.catalog import CATALOG


def runs_path(fig: Figure, conf: Path) -> Optional[str]:
    """The declared run tree of ``fig``: its own, else its preset's ``hydra.sweep.dir``."""
    return fig.runs or preset_sweep_dir(conf, fig.preset or fig.id)


def draw(fig: Figure, root: Path, conf: Path, runs: Optional[Path] = None, out: Optional[Path] = None) -> Optional[Job]:
    """Draw ``fig`` (``runs`` / ``out`` replace the declared directories); ``None`` when it has no runs."""
    shown = runs if runs is not None else Path(runs_path(fig, conf) or f"results/{fig.id}/runs")
    found = shown if shown.is_absolute() or runs is not None else root / shown
    records = load_runs(found)
    if not records:
        warn(f"{fig.id}: missing: no run under {found}")
        return None
    out = out if out is not None else runs if runs is not None else root / (fig.out or f"results/{fig.paper_name}")
    out.mkdir(parents=True, exist_ok=True)
    job = Job(fig, shown, out, conf, records)
    RECIPES[fig.recipe](job)
    for problem in job.problems:
        warn(f"{fig.id}: {problem}")
    print(f"{fig.id}: wrote " + ", ".join(str(p) for p in job.written)
          + (f" ({len(job.problems)} missing or failed, named in the .md)" if job.problems else ""))
    return job


def main(argv: Optional[list[str]] = None, repo: Optional[Path] = None) -> int:
    repo = repo or Path.cwd()
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["curve"]:
        return sweep_curve.main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="*", help="figure ids, <paper>/<id> (--list shows them); or `curve --runs DIR` "
                                               "for the learning curve of any sweep")
    parser.add_argument("--all", action="store_true", help="every declared figure whose runs are present")
    parser.add_argument("--runs", type=Path, help="run directory tree (default: the declared one)")
    parser.add_argument("--out", type=Path, help="output directory (default: the declared one; with --runs, "
                        "the runs directory: your own runs never write into results/)")
    parser.add_argument("--root", type=Path, default=repo, help="where the declared results/... paths start")
    parser.add_argument("--conf", type=Path, default=repo / "conf", help="the conf/ directory (paper numbers, presets)")
    parser.add_argument("--list", action="store_true", help="list the declared figures and their run trees")
    args = parser.parse_args(argv)
    if args.list:
        for fig in CATALOG.values():
            print(f"{fig.id}\t{fig.recipe}\t{runs_path(fig, args.conf)}")
        return 0
    unknown = [i for i in args.ids if i not in CATALOG]
    if unknown:
        parser.error("; ".join(f"unknown figure id {i!r}" + (f", did you mean {', '.join(close)}?" if (
            close := difflib.get_close_matches(i, list(CATALOG), n=3, cutoff=0.6)) else "") for i in unknown)
            + " (--list shows every id)")
    if args.all == bool(args.ids):
        parser.error("give figure ids or --all; for the learning curve of your own sweep: curve --runs DIR")
    if (args.runs or args.out) and len(args.ids) != 1:
        parser.error("--runs and --out go with one figure id")
    figures = list(CATALOG.values()) if args.all else [CATALOG[i] for i in args.ids]
    missing = [fig.id for fig in figures if draw(fig, args.root, args.conf, args.runs, args.out) is None]
    if missing:
        warn(f"missing (no runs): {', '.join(missing)}")
    return 1 if missing and not args.all else 0
