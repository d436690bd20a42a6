"""Recipe ``curve``: a metric against the round, one line per row (the value of one override),
mean ± sd band over the seeds (the runs of a row) where there are repeats.

Declaration: ``rows`` (the override, or ``cfg:<key>``), ``metric`` (a ``metrics.csv`` column,
default ``test_acc``, or a list of columns: one line per row and column); ``options``: ``scale``
(default 100: fractions to %), ``expect`` (the rows the figure must show, in order: one without a
run is named as missing), ``labels`` (``{row: label}``), ``column_labels`` (``{column: label}``),
``ylabel``, ``yscale`` (matplotlib's, default ``linear``), ``digits`` (of the .md's values, default 2),
``where`` (``{override or cfg:<key>: value}``: only those runs, e.g. one γ of a sweep).

The band is taken over the completed runs of a row, round by round (the rounds every one of them
evaluated); a run that is not ``completed`` is drawn dashed, on its own, and named in the .md and on
stderr. The .md lists each row's last-round value (mean ± sd, number of seeds).
"""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from fedbn_bench.figures.base import COMPLETED, Job, cell, matching_runs, md_table, mean_std, recipe, row_key  # noqa: E402
from fedbn_bench.records.reader import RunRecord  # noqa: E402

METRICS = {"test_acc": "test accuracy", "val_acc": "validation accuracy", "robust_acc": "robust accuracy",
           "client_acc_mean": "mean client accuracy", "test_loss": "test loss", "train_loss": "training loss",
           "val_loss": "validation loss"}
"""Axis names of the usual ``metrics.csv`` columns."""


def axis_label(metric: str, percent: bool) -> str:
    """``test accuracy (%)`` for ``test_acc``; the column name for one this module does not know."""
    return METRICS.get(metric, metric.replace("_", " ")) + (" (%)" if percent else "")


def band(runs: list[RunRecord], column: str, scale: float = 100.0) -> tuple[list[float], list[float], list[float]]:
    """``(rounds, mean, sd)`` of ``column`` × ``scale`` over ``runs``, on the rounds all of them have
    a number for (NaN: none yet, e.g. a change since the previous evaluation; sd with ddof = 1; 0 for
    one run)."""
    curves = [{r: v for r, v in zip(*run.curve(column)) if not math.isnan(v)} for run in runs]
    rounds = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
    stats = [mean_std([scale * c[r] for c in curves]) for r in rounds]
    return rounds, [m for m, _ in stats], [s for _, s in stats]


def groups(job: Job) -> dict[str, list[RunRecord]]:
    """Runs by row: the expected rows first (empty when missing), then the others, sorted."""
    found: dict[str, list[RunRecord]] = {}
    for run in matching_runs(job.runs, job.figure.options.get("where", {})):
        found.setdefault(row_key(run, job.figure.rows) or "?", []).append(run)
    expect = list(job.figure.options.get("expect", []))
    return {key: found.get(key, []) for key in [*expect, *sorted(set(found) - set(expect))]}


@recipe("curve")
def make(job: Job) -> None:
    fig_decl = job.figure
    metric, scale = fig_decl.metric or "test_acc", fig_decl.options.get("scale", 100.0)
    columns = [metric] if isinstance(metric, str) else list(metric)
    labels, column_labels = fig_decl.options.get("labels", {}), fig_decl.options.get("column_labels", {})
    digits = fig_decl.options.get("digits", 2)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    body = []
    for key, runs in groups(job).items():
        done = [r for r in runs if r.status == COMPLETED]
        for column in columns:
            label = labels.get(key, key)
            if len(columns) > 1:
                label = f"{label}: {column_labels.get(column, column)}"
            rounds, mean, sd = band(done, column, scale)
            if rounds:
                line, = ax.plot(rounds, mean, marker=".", label=f"{label} ({len(done)} seed{'s' * (len(done) > 1)})")
                if len(done) > 1:
                    ax.fill_between(rounds, [m - s for m, s in zip(mean, sd)], [m + s for m, s in zip(mean, sd)],
                                    color=line.get_color(), alpha=0.2)
            for run in runs:
                if run.status != COMPLETED:
                    xs, ys = run.curve(column)
                    if xs:
                        ax.plot(xs, [scale * y for y in ys], linestyle="--", linewidth=1,
                                label=f"{label}, {run.path.name} ({run.status})")
            last = f"{cell(mean[-1], digits)} ± {cell(sd[-1], digits)}" if rounds else "–"
            body.append([label, str(len(runs)), str(len(done)), str(rounds[-1]) if rounds else "–", last])
        row_label = labels.get(key, key)
        for run in runs:
            if run.status != COMPLETED:
                job.problem(f"{row_label}: run {run.path.name} is {run.status_text} (not in the band)")
        if not runs:
            job.problem(f"{row_label}: no run (missing)")
    what = columns[0] if len(columns) == 1 else "value"
    ax.set_xlabel("round")
    ax.set_ylabel(fig_decl.options.get("ylabel", axis_label(what, scale == 100) if scale in (1, 100) else f"{what} (× {scale:g})"))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_yscale(fig_decl.options.get("yscale", "linear"))
    ax.set_title(fig_decl.title or fig_decl.id, fontsize=10)
    ax.legend(fontsize=8, title="band: ±1 sd over seeds", title_fontsize=8)
    fig.tight_layout()
    job.save(fig)
    lines = [f"# {fig_decl.title or fig_decl.id}", "",
             f"Runs: `{job.runs_dir}`; rows: override `{fig_decl.rows}`; {', '.join(f'`{c}`' for c in columns)} "
             f"× {scale:g} against the round, mean ± sample sd over the completed runs (seeds) of each row, "
             "on the rounds all of them evaluated.", "",
             *md_table(["row", "runs", "completed", "last round", f"{what} at the last round"], body,
                       ["---", "---:", "---:", "---:", "---:"]), "",
             "Missing or failed runs: " + ("none." if not job.problems else ""), *(f"- {p}" for p in job.problems)]
    job.write_md("\n".join(lines) + "\n")
