"""Recipe ``grid``: a metric over two sweep keys (rows × columns), one heat map per panel (the value
of a third key), e.g. FixBN Fig. D: non-IID degree × local steps E, one panel per norm, and the
difference of two panels (Acc(GN) − Acc(BN)).

Declaration: ``rows`` (the override, or ``cfg:<key>``, whose value names a run's row), ``metric`` (a
source as in ``paper_table``: ``final:<column>``, ``best:<column>`` or ``summary:<key>``; default
``final:test_acc``); ``options``: ``columns`` (the override naming a run's column), ``panels`` (the
override naming its panel; without it one panel), ``where`` (``{override: value}``: only those runs),
``expect_rows`` / ``expect_columns`` / ``expect_panels`` (the values the figure must show, in order:
a cell of them without a run is named as missing), ``difference`` (``[a, b]``: an extra panel with
panel a − panel b), ``labels`` (``{value: label}``, any axis), ``scale`` (ours × scale, default 100),
``digits`` (default 2).

A cell is the mean over the completed runs of its (panel, row, column) (± sample sd where there are
several seeds); a run that is not ``completed`` stays out of the mean and is named in the .md and on
stderr, as is an expected cell without a run.
"""
from __future__ import annotations

from typing import Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fedbn_bench.figures.base import (COMPLETED, Job, cell, matching_runs, md_table, mean_std, measure, recipe,  # noqa: E402
                                      row_key)
from fedbn_bench.records.reader import RunRecord  # noqa: E402

Cell = tuple[str, str, str]
"""(panel, row, column)."""


def key(run: RunRecord, override: Optional[str]) -> str:
    """The value of ``override`` in ``run`` (``""`` without an override name, ``?`` when unset)."""
    if not override:
        return ""
    return row_key(run, override) or "?"


def ordered(expected: list, found: set[str]) -> list[str]:
    """The expected values first, in order, then the others, sorted."""
    expected = [str(v) for v in expected]
    return [*expected, *sorted(found - set(expected))]


def collect(job: Job) -> tuple[list[str], list[str], list[str], dict[Cell, list[RunRecord]]]:
    """Panels, rows, columns (expected first) and the runs of every cell (``where`` applied)."""
    fig, opts = job.figure, job.figure.options
    runs = matching_runs(job.runs, opts.get("where", {}))
    groups: dict[Cell, list[RunRecord]] = {}
    for run in runs:
        groups.setdefault((key(run, opts.get("panels")), key(run, fig.rows), key(run, opts.get("columns"))),
                          []).append(run)
    panels = ordered(opts.get("expect_panels", []), {c[0] for c in groups})
    rows = ordered(opts.get("expect_rows", []), {c[1] for c in groups})
    columns = ordered(opts.get("expect_columns", []), {c[2] for c in groups})
    return panels or [""], rows, columns, groups


def values(job: Job) -> tuple[list[str], list[str], list[str], dict[Cell, tuple]]:
    """Panels (the difference panel last), rows, columns and ``{cell: (mean, sd, n)}``; names the
    missing and failed runs as problems."""
    fig, opts = job.figure, job.figure.options
    source, scale = fig.metric or "final:test_acc", opts.get("scale", 100.0)
    labels = opts.get("labels", {})
    panels, rows, columns, groups = collect(job)
    out: dict[Cell, tuple] = {}
    for p in panels:
        for r in rows:
            for c in columns:
                group = groups.get((p, r, c), [])
                name = " / ".join(labels.get(v, v) for v in (p, r, c) if v)
                if not group:
                    job.problem(f"{name}: no run (missing)")
                for run in group:
                    if run.status != COMPLETED:
                        job.problem(f"{name}: run {run.path.name} is {run.status_text} (not in the means)")
                done = [measure(run, source) for run in group if run.status == COMPLETED]
                done = [v * scale for v in done if v is not None]
                mean, sd = mean_std(done)
                out[(p, r, c)] = (mean, sd, len(done))
    if opts.get("difference"):
        a, b = (str(v) for v in opts["difference"])
        diff = f"{labels.get(a, a)} − {labels.get(b, b)}"
        for r in rows:
            for c in columns:
                ma, mb = out.get((a, r, c), (None,))[0], out.get((b, r, c), (None,))[0]
                out[(diff, r, c)] = (None if ma is None or mb is None else ma - mb, None, 1)
        panels = [*panels, diff]
    return panels, rows, columns, out


def text(value: tuple, digits: int, sign: bool = False) -> str:
    mean, sd, n = value
    return cell(mean, digits, sign) if n <= 1 or mean is None else f"{cell(mean, digits)} ± {cell(sd, digits)}"


def markdown(job: Job, panels: list[str], rows: list[str], columns: list[str], out: dict) -> str:
    fig, opts = job.figure, job.figure.options
    labels, digits = opts.get("labels", {}), opts.get("digits", 2)
    diff = panels[-1] if opts.get("difference") else None
    lines = [f"# {fig.title or fig.id}", "",
             f"Runs: `{job.runs_dir}`{' where ' + str(dict(opts['where'])) if opts.get('where') else ''}; "
             f"rows: override `{fig.rows}`; columns: override `{opts.get('columns')}`"
             f"{'; panels: override `' + opts['panels'] + '`' if opts.get('panels') else ''}. "
             f"Cells: {fig.metric or 'final:test_acc'} (× {opts.get('scale', 100.0):g}), mean over the completed "
             "runs (± sample sd over seeds where there are several)."]
    for p in panels:
        body = [[labels.get(r, r), *(text(out[(p, r, c)], digits, sign=p == diff) for c in columns)] for r in rows]
        lines += ["", *([f"## {labels.get(p, p)}", ""] if p else []),
                  *md_table([labels.get(fig.rows, fig.rows or ""), *(labels.get(c, c) for c in columns)], body,
                            ["---", *["---:"] * len(columns)])]
    lines += ["", "Missing or failed runs: " + ("none." if not job.problems else ""), *(f"- {p}" for p in job.problems)]
    return "\n".join(lines) + "\n"


def plot(job: Job, panels: list[str], rows: list[str], columns: list[str], out: dict) -> None:
    opts = job.figure.options
    labels, diff = opts.get("labels", {}), (panels[-1] if opts.get("difference") else None)
    fig, axes = plt.subplots(1, len(panels), figsize=(1.0 + (0.9 * len(columns) + 1.6) * len(panels),
                                                      1.4 + 0.5 * len(rows)), squeeze=False)
    for ax, p in zip(axes[0], panels):
        grid = [[out[(p, r, c)][0] for c in columns] for r in rows]
        flat = [v for row in grid for v in row if v is not None]
        bound = max((abs(v) for v in flat), default=1.0) or 1.0
        image = ax.imshow([[float("nan") if v is None else v for v in row] for row in grid],
                          cmap="RdBu" if p == diff else "viridis", aspect="auto",
                          **({"vmin": -bound, "vmax": bound} if p == diff else {}))
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                ax.text(j, i, "–" if v is None else f"{v:.1f}", ha="center", va="center", fontsize=8,
                        color="black" if p == diff else "white")
        ax.set_xticks(range(len(columns)), [labels.get(c, c) for c in columns], fontsize=8)
        ax.set_yticks(range(len(rows)), [labels.get(r, r) for r in rows], fontsize=8)
        ax.set_title(labels.get(p, p), fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.046)
    fig.suptitle(job.figure.title or job.figure.id, fontsize=10)
    fig.tight_layout()
    job.save(fig)


@recipe("grid")
def make(job: Job) -> None:
    panels, rows, columns, out = values(job)
    job.write_md(markdown(job, panels, rows, columns, out))
    if rows and columns:
        plot(job, panels, rows, columns, out)
