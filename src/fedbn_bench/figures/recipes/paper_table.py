"""Recipe ``paper_table``: rows = the value of one override (the method), columns = metrics, each as
ours / paper / ours − paper side by side.

Declaration: ``rows`` (the override, or ``cfg:<key>``), ``metric`` = ``{paper column: source}`` with
source ``summary:<key>`` (a ``summary.json`` number), ``final:<column>`` (the last value of a
``metrics.csv`` column) or ``best:<column>`` (its maximum); ``paper`` / ``paper_where`` (the
paper's numbers); ``options``: ``scale`` (ours × scale, default 100: fractions to %), ``digits``
(default 2), ``labels`` (``{method: label}`` for rows the paper file does not label).

Ours = mean over the completed runs of a row (± sample sd where there are several seeds). Every
paper row appears (``missing`` without a run); a run that is not ``completed`` keeps its status in
its row and is named under the table and on stderr; rows only we ran follow the paper's.
"""
from __future__ import annotations


import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fedbn_bench.figures.base import (COMPLETED, Job, cell, md_table, mean_std, measure, number, recipe,  # noqa: E402
                                      row_key)
from fedbn_bench.records.reader import RunRecord  # noqa: E402


def table_rows(job: Job) -> list[dict]:
    """One dict per row: method, label, runs, status, and per metric column ``<col>`` (ours, mean),
    ``<col>_sd``, ``<col>_n`` (completed runs with it), ``<col>_paper`` and ``<col>_diff``."""
    fig = job.figure
    scale = fig.options.get("scale", 100.0)
    paper = job.paper_rows()
    groups: dict[str, list[RunRecord]] = {}
    for run in job.runs:
        groups.setdefault(row_key(run, fig.rows) or f"? ({run.path.name})", []).append(run)
    rows = []
    for method in [*paper, *sorted(set(groups) - set(paper))]:
        group = groups.get(method, [])
        done = [r for r in group if r.status == COMPLETED]
        label = paper.get(method, {}).get("label") or fig.options.get("labels", {}).get(method, method)
        row = {"method": method, "label": label, "runs": len(group),
               "status": ",".join(sorted({r.status for r in group})) or "missing"}
        for column, source in fig.metric.items():
            values = [v * scale for v in (measure(r, source) for r in done) if v is not None]
            mean, sd = mean_std(values)
            ref = number(paper.get(method, {}).get(column))
            row |= {column: mean, f"{column}_sd": sd, f"{column}_n": len(values), f"{column}_paper": ref,
                    f"{column}_diff": None if mean is None or ref is None else mean - ref}
        rows.append(row)
        if not group:
            job.problem(f"{label}: no run (missing)")
        for run in group:
            if run.status != COMPLETED:
                job.problem(f"{label}: run {run.path.name} is {run.status} (not in the means)")
    return rows


def ours(row: dict, column: str, digits: int) -> str:
    mean, sd, n = row[column], row[f"{column}_sd"], row[f"{column}_n"]
    return cell(mean, digits) if n <= 1 else f"{cell(mean, digits)} ± {cell(sd, digits)}"


def markdown(job: Job, rows: list[dict]) -> str:
    fig, digits = job.figure, job.figure.options.get("digits", 2)
    header = ["method", "runs", "status"]
    for column in fig.metric:
        header += [f"{column} ours", f"{column} paper", f"{column} ours − paper"]
    body = [[r["label"], str(r["runs"]), r["status"],
             *(c for column in fig.metric for c in (ours(r, column, digits), cell(r[f"{column}_paper"], digits),
                                                     cell(r[f"{column}_diff"], digits, sign=True)))]
            for r in rows]
    sources = ", ".join(f"`{c}` = {s}" for c, s in fig.metric.items())
    lines = [f"# {fig.title or fig.id}", "",
             f"Runs: `{job.runs_dir}`; rows: override `{fig.rows}`; paper: "
             f"`conf/experiment/{fig.paper}`{' ' + str(dict(fig.paper_where)) if fig.paper_where else ''}. "
             f"Ours: {sources} (× {fig.options.get('scale', 100.0):g}), mean over the completed runs "
             "(± sample sd over seeds where there are several).", "",
             *md_table(header, body, ["---", "---:", "---", *["---:"] * (len(header) - 3)]), "",
             "Missing or failed runs: " + ("none." if not job.problems else ""),
             *(f"- {p}" for p in job.problems)]
    return "\n".join(lines) + "\n"


def plot(job: Job, rows: list[dict]) -> None:
    columns = list(job.figure.metric)
    fig, axes = plt.subplots(1, len(columns), figsize=(max(5.0, 0.9 * len(rows) + 2) * len(columns), 4.2),
                             squeeze=False)
    xs = range(len(rows))
    for ax, column in zip(axes[0], columns):
        ax.bar([x - 0.2 for x in xs], [r[column] or 0 for r in rows], width=0.4, label="ours",
               yerr=[r[f"{column}_sd"] or 0 for r in rows], capsize=3)
        ax.bar([x + 0.2 for x in xs], [r[f"{column}_paper"] or 0 for r in rows], width=0.4, label="paper",
               hatch="//", alpha=0.8)
        ax.set_xticks(list(xs), [r["label"] if r["status"] == COMPLETED else f"{r['label']}\n({r['status']})"
                                 for r in rows], rotation=20, ha="right", fontsize=8)
        ax.set_title(column)
        ax.legend(fontsize=8)
    fig.suptitle(job.figure.title or job.figure.id, fontsize=10)
    fig.tight_layout()
    job.save(fig)


@recipe("paper_table")
def make(job: Job) -> None:
    rows = table_rows(job)
    job.write_md(markdown(job, rows))
    plot(job, rows)
