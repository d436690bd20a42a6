"""Kept for old commands: ``python scripts/fbn_fig3a_table.py`` is ``python scripts/make_figures.py
fbn/fig3a_toy``; with ``--runs results/fbn/fig3a_<digits8x8|mnist>/runs`` it is ``fbn/fig3a`` or
``fbn/fig3a_mnist`` (the note under the title is the declared one)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fedbn_bench.figures.cli import main as make_figures

FIGURES = {"fig3a_toy": "fbn/fig3a_toy", "fig3a_digits8x8": "fbn/fig3a", "fig3a_mnist": "fbn/fig3a_mnist"}

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("results/fbn/fig3a_toy/runs"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--note", help="ignored: the note is declared in src/fedbn_bench/figures/catalog/<paper>.py")
    args = parser.parse_args()
    figure = FIGURES.get(args.runs.resolve().parent.name, "fbn/fig3a_toy")
    extra = ["--runs", str(args.runs)] + (["--out", str(args.out)] if args.out else [])
    sys.exit(make_figures([figure, *extra], repo=Path(__file__).resolve().parents[1]))
