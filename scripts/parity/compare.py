"""Compare the runs of an author's code with ours (``figures/parity.py``): ``<out>.md`` with each method's final
test accuracy on both sides (mean ± sd over seeds, ours − theirs, Welch's t) and ``<out>.png`` with the
accuracy curves (mean ± sd band over the seeds of each side, one panel per method). ``--metric`` compares
another summary accuracy and ``--curve`` draws another metrics column (FedRBN's code: ``robust_acc_at_best_val``
or ``test_acc_at_best_val``, and ``val_select``).

    python scripts/parity/compare.py --authors results/hbn/parity_code/authors results/fbn/parity_hbn_code/authors \
        --ours results/hbn/parity_code/runs results/fbn/parity_hbn_code/runs --out results/parity/hybridbn \
        --title "Parity with the authors' code: HybridBN @ 1c0e151"

Runs are found under each directory (``records/reader.py``) and grouped by ``norm.name``. Exit status 1
when a side has no run at all.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from fedbn_bench.figures.base import COMPLETED  # noqa: E402
from fedbn_bench.figures.parity import FINAL, Comparison, compare, table  # noqa: E402
from fedbn_bench.figures.recipes.curve import band  # noqa: E402
from fedbn_bench.records.reader import RunRecord, read_runs  # noqa: E402


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--authors", nargs="+", required=True, type=Path, help="directories of the authors' run records")
    parser.add_argument("--ours", nargs="+", required=True, type=Path, help="directories of our run records")
    parser.add_argument("--out", required=True, type=Path, help="output path without suffix (.md and .png are written)")
    parser.add_argument("--title", default="Parity with the authors' code")
    parser.add_argument("--metric", default=FINAL, help="the summary accuracy compared (summary.json key)")
    parser.add_argument("--curve", default="test_acc", help="the metrics.csv column drawn against the round")
    return parser.parse_args(argv)


def read(directories: list[Path]) -> list[RunRecord]:
    return [run for d in directories for run in read_runs(d)]


def plot(comparisons: list[Comparison], path: Path, column: str = "test_acc") -> None:
    """One panel per method: ``column`` against the round, mean ± sd over each side's completed runs."""
    fig, axes = plt.subplots(1, len(comparisons), figsize=(3.2 * len(comparisons), 3.2), squeeze=False)
    for ax, c in zip(axes[0], comparisons):
        for side, runs, style in (("authors' code", c.authors, "--"), ("fedbn-bench", c.ours, "-")):
            done = [r for r in runs if r.status == COMPLETED]
            rounds, mean, sd = band(done, column)
            if rounds:
                line, = ax.plot(rounds, mean, style, marker="o", label=f"{side} ({len(done)})")
                ax.fill_between(rounds, [m - s for m, s in zip(mean, sd)], [m + s for m, s in zip(mean, sd)],
                                color=line.get_color(), alpha=0.2)
        ax.set_title(c.method, fontsize=10)
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("test accuracy (%)" if column == "test_acc" else f"{column} (%)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(args: argparse.Namespace, comparisons: list[Comparison], figure: Path) -> str:
    left_out = [f"- {c.method}, {text}" for c in comparisons for text in c.not_counted()]
    return "\n".join([
        f"# {args.title}", "",
        f"Authors' runs: {', '.join(f'`{d}`' for d in args.authors)}; ours: {', '.join(f'`{d}`' for d in args.ours)}. "
        f"{'Final test accuracy' if args.metric == FINAL else f'`{args.metric}`'} (%) as mean ± sample sd over the "
        "completed runs (seeds; a seed is a different draw on each side), the difference of the means, Welch's t "
        f"of it (degrees of freedom) and its two-sided p. Curves: `{figure.name}` (`{args.curve}`, mean ± sd band "
        "per side).", "",
        *table(comparisons), "",
        "Runs left out: " + ("none." if not left_out else ""), *left_out, "",
        f"![accuracy curves]({figure.name})", ""])


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    authors, ours = read(args.authors), read(args.ours)
    if not authors or not ours:
        print(f"no runs under {'the authors' if not authors else 'our'} directories", file=sys.stderr)
        return 1
    comparisons = compare(authors, ours, args.metric)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figure = args.out.with_suffix(".png")
    plot(comparisons, figure, args.curve)
    args.out.with_suffix(".md").write_text(markdown(args, comparisons, figure))
    print(f"wrote {args.out.with_suffix('.md')} and {figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
