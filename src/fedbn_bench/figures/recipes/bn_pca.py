"""Recipe ``bn_pca``: the users' BN statistics on their first two principal components, one scatter
per (run, layer), from the final evaluation of the ``bn_statistics_pca`` metric (FedRBN Fig. 7 and
Fig. 13: colour = the user's domain, marker = the statistics branch, BN_a × and BN_c ○).

Declaration: ``options.layers`` (``{module name: label}``, layers the run's ``bn_statistics_pca`` metric
projects; one panel per layer and run, in this order).
Only completed runs are drawn; the others, and a completed run without a layer's columns, are named
in the .md and on stderr. The .md lists each panel's coordinates (4 significant digits) and the
share of the variance along each axis.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from fedbn_bench.figures.base import COMPLETED, Job, md_table, recipe  # noqa: E402
from fedbn_bench.records.reader import RunRecord  # noqa: E402

BRANCHES = {"clean": ("BN_c", "o"), "adv": ("BN_a", "x"), "bn": ("BN", "o")}
"""A branch of the metric's columns -> (label, marker)."""


def style(branch: str) -> tuple[str, str]:
    """(label, marker) of a branch; an unknown one is labelled by its name, with triangles."""
    return BRANCHES.get(branch, (branch, "^"))


@dataclass
class Point:
    user: str
    domain: str
    branch: str
    pc1: Optional[float]
    pc2: Optional[float]


@dataclass
class Panel:
    title: str
    round: Optional[float]
    points: list[Point]
    explained: tuple[Optional[float], Optional[float]]


def final_points(run: RunRecord, layer: str) -> Optional[tuple[dict[str, Optional[float]], list[Point]]]:
    """The last metrics row with ``layer``'s columns and its points, in column order (``None``
    without such a row)."""
    prefix = f"bn_pca/{layer}/"
    rows = [row for row in run.rows if row.get(f"{prefix}explained/pc1") is not None]
    if not rows:
        return None
    row = rows[-1]
    points = []
    for key in row:
        parts = key[len(prefix):].split("/") if key.startswith(prefix) else []
        if len(parts) == 4 and parts[0] != "explained" and parts[3] == "pc1":
            user, domain, branch = parts[:3]
            points.append(Point(user, domain, branch, row[key], row.get(f"{prefix}{user}/{domain}/{branch}/pc2")))
    return row, points


def significant(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.4g}"


def percent(value: Optional[float]) -> str:
    return "–" if value is None else f"{100 * value:.2f} %"


def draw(panels: list[Panel], title: str):
    """One scatter per panel; the domains share one colour each across panels."""
    domains = list(dict.fromkeys(p.domain for panel in panels for p in panel.points))
    colours = {d: plt.get_cmap("tab10")(i % 10) for i, d in enumerate(domains)}
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(5.0 * max(len(panels), 1), 4.4), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        for p in [p for p in panel.points if p.pc1 is not None and p.pc2 is not None]:
            marker = style(p.branch)[1]
            ax.scatter(p.pc1, p.pc2, color=colours[p.domain], marker=marker,
                       facecolors="none" if marker == "o" else None, s=36)
        ax.set_title(panel.title, fontsize=9)
        ax.set_xlabel(f"PC1 ({percent(panel.explained[0])})")
        ax.set_ylabel(f"PC2 ({percent(panel.explained[1])})")
    if not panels:
        axes[0][0].text(0.5, 0.5, "no completed run with bn_statistics_pca columns", ha="center", va="center")
    branches = list(dict.fromkeys(p.branch for panel in panels for p in panel.points))
    handles = [Line2D([], [], linestyle="", marker="s", color=colours[d], label=d) for d in domains]
    for branch in branches:
        label, marker = style(branch)
        handles.append(Line2D([], [], linestyle="", color="0.3", marker=marker, label=label,
                              markerfacecolor="none" if marker == "o" else "0.3"))
    if handles:
        axes[0][-1].legend(handles=handles, fontsize=7, loc="best")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


@recipe("bn_pca")
def make(job: Job) -> None:
    decl = job.figure
    layers = dict(decl.options.get("layers", {}))
    panels: list[Panel] = []
    for run in job.runs:
        if run.status != COMPLETED:
            job.problem(f"run {run.path.name} is {run.status_text} (not drawn)")
            continue
        for layer, label in layers.items():
            found = final_points(run, layer)
            if found is None:
                job.problem(f"run {run.path.name} has no bn_pca/{layer} columns "
                            f"(metrics: [{{name: bn_statistics_pca, layer: {layer}}}])")
                continue
            row, points = found
            panels.append(Panel(f"{run.path.name}: {label} ({layer})", row.get("round"), points,
                                (row[f"bn_pca/{layer}/explained/pc1"], row.get(f"bn_pca/{layer}/explained/pc2"))))
    job.save(draw(panels, decl.title or decl.id))
    lines = [f"# {decl.title or decl.id}", "",
             f"Runs: `{job.runs_dir}`. Each panel is one run's final `bn_statistics_pca` evaluation (metrics.csv "
             "columns `bn_pca/<layer>/<user>/<domain>/<branch>/pc1|pc2`): every user's running mean ‖ variance of "
             "the layer, per branch (BN_c clean, BN_a adversarial), projected jointly on the first two principal "
             "components.", ""]
    for panel in panels:
        at = "" if panel.round is None else f", round {panel.round:.0f}"
        lines += [f"## {panel.title}{at}", "",
                  f"PC1 explains {percent(panel.explained[0])} and PC2 {percent(panel.explained[1])} of the variance.",
                  "",
                  *md_table(["user", "domain", "branch", "PC1", "PC2"],
                            [[p.user, "–" if p.domain == "-" else p.domain, style(p.branch)[0],
                              significant(p.pc1), significant(p.pc2)] for p in panel.points],
                            ["---:", "---", "---", "---:", "---:"]), ""]
    lines += ["Missing or failed runs: " + ("none." if not job.problems else ""), *(f"- {p}" for p in job.problems)]
    job.write_md("\n".join(lines) + "\n")
