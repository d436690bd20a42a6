"""``python scripts/make_figures.py curve --runs DIR [--metric test_acc] [--by norm] [--out DIR]``:
a learning curve of any sweep, from its run records only.

Runs are grouped by the overrides the sweep varies (``--by``: some of them; default: every varied
override but ``seed``); each group is one line, the mean over its completed runs (the seeds) with a
band of ±1 sample standard deviation where it has two or more. Accuracies are drawn in %, method
names as the papers write them (``fbn`` → FBN), the title naming what every run shares (dataset, α, ...);
a line with fewer than ``MIN_POINTS`` evaluations is warned about. Writes ``<out>/curve_<metric>.png`` and ``.md`` (the
last round's mean ± sd per group); a run that did not complete is named there and on stderr.
"""
from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from fedbn_bench.figures.base import COMPLETED, cell, load_runs, md_table, warn  # noqa: E402
from fedbn_bench.figures.recipes.curve import axis_label, band  # noqa: E402
from fedbn_bench.records.reader import RunRecord  # noqa: E402

DISPLAY = {
    "norm": {"bn": "BN", "fbn": "FBN", "hbn": "HBN", "fixbn": "FixBN", "fedbn": "FedBN", "fedfn": "FedFN",
             "fedrbn": "FedRBN", "dbn": "DBN", "gn": "GN", "ln": "LN", "in": "IN", "none": "no norm"},
    "algo": {"fedavg": "FedAvg", "dsgd": "DSGD", "fedprox": "FedProx", "scaffold": "SCAFFOLD", "fedadam": "FedAdam",
             "fedyogi": "FedYogi", "fedadagrad": "FedAdagrad", "fedavgm": "FedAvgM", "moon": "MOON",
             "fedsam": "FedSAM", "fedacg": "FedACG", "fedwon": "FedWon", "centralized": "centralized",
             "local": "local only"},
}
"""Method names as the papers write them; a value not listed is shown as given."""

SETTING = ("dataset.name", "partition.name", "partition.alpha", "partition.gamma", "model.name", "norm.name", "algo.name",
           "rounds")
"""The config values a title names when every run of the sweep shares them."""
MIN_POINTS = 3
"""Fewer evaluated rounds than this make no curve: ``make_figures.py curve`` warns."""
IGNORED = ("seed", "hydra.", "progress", "logger")
"""Overrides that never name a group: the seed is what a band is taken over; the rest do not change a result."""


def varied_overrides(runs: list[RunRecord]) -> list[str]:
    """The override keys whose value differs between ``runs``, in the order the first run lists them."""
    keys = dict.fromkeys(item.partition("=")[0].lstrip("+~") for run in runs for item in run.overrides)
    return [k for k in keys if not k.startswith(IGNORED) and len({run.override(k) for run in runs}) > 1]


def fixed_settings(runs: list[RunRecord], varied: list[str]) -> list[str]:
    """What every run shares, for the title: its dataset, partition (with α or γ), model, norm, algorithm and
    rounds (from the config), and each override the sweep does not vary."""
    keys = [k for k in dict.fromkeys(item.partition("=")[0].lstrip("+~") for run in runs for item in run.overrides)
            if not k.startswith(IGNORED) and k not in varied]
    named = {k.split(".")[0] for k in keys} | {k.split(".")[0] for k in varied}
    shared = [label(key.removesuffix(".name"), value) for key in SETTING
              if key.removesuffix(".name") not in named and len({str(run.get(key)) for run in runs}) == 1
              and (value := runs[0].get(key)) is not None]
    overrides = [label(k, runs[0].override(k)) for k in keys if len({run.override(k) for run in runs}) == 1]
    return list(dict.fromkeys(shared + overrides))


def label(key: str, value: Optional[str]) -> str:
    """``fbn`` → ``FBN`` for a method key; ``alpha = 0.1`` for any other."""
    if key in DISPLAY:
        return DISPLAY[key].get(value, str(value))
    return f"{key.split('/')[-1].split('.')[-1]} = {value}"


def groups(runs: list[RunRecord], by: list[str]) -> dict[tuple[Optional[str], ...], list[RunRecord]]:
    """Runs by their values of ``by``, in sorted order of those values."""
    found: dict[tuple[Optional[str], ...], list[RunRecord]] = {}
    for run in runs:
        found.setdefault(tuple(run.override(k) for k in by), []).append(run)
    return dict(sorted(found.items(), key=lambda kv: tuple(str(v) for v in kv[0])))


def draw_curve(runs_dir: Path, out: Path, metric: str = "test_acc", by: Optional[list[str]] = None) -> list[Path]:
    """Draw ``metric`` against the round for the sweep under ``runs_dir``; the files written."""
    runs = load_runs(runs_dir)
    if not runs:
        raise ValueError(f"no run under {runs_dir} (a run directory holds .hydra/ or summary.json)")
    varied = varied_overrides(runs)
    by = by if by is not None else varied
    unknown = [k for k in by if all(run.override(k) is None for run in runs)]
    if unknown:
        raise ValueError(f"--by {','.join(unknown)}: not an override of these runs; varied here: "
                         f"{', '.join(varied) or 'nothing (one configuration)'}")
    if all(metric not in row for run in runs for row in run.rows):
        columns = sorted({c for run in runs for row in run.rows for c in row} - {"round"})
        raise ValueError(f"--metric {metric}: no run records it; columns: {', '.join(columns)}")
    percent = metric.endswith("_acc") or metric.endswith("acc_mean")
    scale = 100.0 if percent else 1.0
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    body, problems, seeds = [], [], set()
    for values, members in groups(runs, by).items():
        name = ", ".join(label(k, v) for k, v in zip(by, values)) or "all runs"
        done = [r for r in members if r.status == COMPLETED]
        problems += [f"{name}: run {r.path.name} is {r.status_text} (not in the mean)" for r in members if r not in done]
        rounds, mean, sd = band(done, metric, scale)
        if not rounds:
            body.append([name, str(len(members)), "0", "–", "–"])
            continue
        if len(rounds) < MIN_POINTS:
            warn(f"{name}: its curve has {len(rounds)} point(s) (rounds {', '.join(str(int(r)) for r in rounds)}); "
                 f"a curve needs {MIN_POINTS} or more: evaluate more often (a smaller eval_every)")
        seeds.add(len(done))
        line, = ax.plot(rounds, mean, marker=".", label=f"{name} (n={len(done)})")
        if len(done) > 1:
            ax.fill_between(rounds, [m - s for m, s in zip(mean, sd)], [m + s for m, s in zip(mean, sd)],
                            color=line.get_color(), alpha=0.2, linewidth=0)
        body.append([name, str(len(members)), str(len(done)), str(int(rounds[-1])),
                     f"{cell(mean[-1], 1 if percent else 3)} ± {cell(sd[-1], 1 if percent else 3)}"])
    ax.set_xlabel("round")
    ax.set_ylabel(axis_label(metric, percent))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    band_text = "line: mean over seeds (n); band: ±1 sd" if max(seeds, default=1) > 1 else "one run per line"
    setting = textwrap.fill(", ".join(fixed_settings(runs, varied)), 110)
    ax.set_title(f"{axis_label(metric, False)} by {', '.join(by) or 'run'} ({band_text})\n{setting}".strip(), fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for ext in ("png", "pdf"):
        path = out / f"curve_{metric}.{ext}"
        fig.savefig(path, dpi=120, metadata={"CreationDate": None} if ext == "pdf" else None)
        written.append(path)
    plt.close(fig)
    md = out / f"curve_{metric}.md"
    md.write_text("\n".join([
        f"# {axis_label(metric, percent)} by {', '.join(by) or 'run'}", "",
        f"Runs: `{runs_dir}`; grouped by {', '.join(f'`{k}`' for k in by) or 'nothing'} (varied in the sweep: "
        f"{', '.join(f'`{k}`' for k in varied) or 'nothing'}); mean ± sample sd over the completed runs of each "
        "group (its seeds), on the rounds all of them evaluated.", "",
        *md_table(["group", "runs", "completed", "last round", f"{axis_label(metric, percent)} at the last round"],
                  body, ["---", "---:", "---:", "---:", "---:"]), "",
        "Runs left out: " + ("none." if not problems else ""), *(f"- {p}" for p in problems)]) + "\n")
    for problem in problems:
        warn(problem)
    return [*written, md]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="make_figures.py curve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, required=True, help="a run or sweep directory (e.g. multirun/<date>/<time>)")
    parser.add_argument("--metric", default="test_acc", help="a metrics.csv column (default: test_acc)")
    parser.add_argument("--by", help="comma-separated overrides to group by (default: every one the sweep varies but seed)")
    parser.add_argument("--out", type=Path, help="output directory (default: the runs directory)")
    args = parser.parse_args(argv)
    try:
        written = draw_curve(args.runs, args.out or args.runs, args.metric, args.by.split(",") if args.by else None)
    except ValueError as err:
        parser.exit(2, f"error: {err}\n")
    print("wrote " + ", ".join(map(str, written)))
    return 0
