"""Write the toy figures' run records (``fedbn_bench.toy.records``): ``python scripts/toys.py
[hbn_clusters] [fedbn_cos] [--seed 0] [--root DIR]`` (default: every toy, into the repository's
``results/...``), then draw them with ``python scripts/make_figures.py hbn/fig2 fedbn/fig1 fedbn/fig2``.
Each toy takes a second or two on a CPU; no data, no training run."""
from __future__ import annotations

import argparse
from pathlib import Path

from fedbn_bench.toy.records import TOYS, write_record

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("toys", nargs="*", help=f"toys to write, of {', '.join(TOYS)} (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--root", type=Path, default=ROOT, help="where the declared results/... paths start")
    args = parser.parse_args()
    unknown = [t for t in args.toys if t not in TOYS]
    if unknown:
        parser.error(f"unknown toy(s) {unknown}; known: {', '.join(TOYS)}")
    for name in args.toys or TOYS:
        print(f"{name}: wrote {write_record(args.root, name, args.seed)}")


if __name__ == "__main__":
    main()
