"""Recipes of the papers' toy figures, drawn from the records ``scripts/toys.py`` writes
(``fedbn_bench.toy.records``: ``summary.json`` with the toy's ``params``, one CSV per table).

* ``hbn_clusters`` (HBN Fig. 2): four scatter panels (raw; local, global, hybrid normalisation), one
  colour per client cluster; the .md gives each panel's per-cluster mean and std.
* ``fedbn_cos_loss`` (FedBN Fig. 1): each client's squared loss over ``w``, without BN (left) and with
  its local BN (right); a dashed line at the average of the two clients' optima.
* ``fedbn_cos_surface`` (FedBN Fig. 2): client 1's loss over ``(w, γ)``, with both clients' optima
  ``(w_k*, γ_k*)``, their average ``(w̄, γ̄)`` and ``(w̄, γ_1*)`` marked.

Declaration: ``options``: ``toy`` (the record's toy name; a record of another toy is named as a
problem). With several records, the first in sorted order (seed) is drawn.
"""
from __future__ import annotations

import csv
import statistics
from pathlib import Path
from typing import Callable, Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fedbn_bench.figures.base import COMPLETED, Job, cell, md_table, recipe  # noqa: E402
from fedbn_bench.records.reader import RunRecord  # noqa: E402

PANEL_TITLES = {"raw": "(a) raw", "local": "(b) local statistics", "global": "(c) global statistics",
                "hybrid": "(d) hybrid (HBN)"}
COLORS = ("tab:blue", "tab:orange")


def read_table(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def toy_record(job: Job) -> Optional[RunRecord]:
    """The record of the declared toy (``None``, with the problem named, when there is none)."""
    toy = job.figure.options.get("toy")
    found = [r for r in job.runs if r.summary.get("toy") == toy and r.status == COMPLETED]
    if not found:
        job.problem(f"no completed record of toy {toy!r} under {job.runs_dir} (python scripts/toys.py {toy})")
        return None
    return found[0]


Draw = Callable[[Job, dict, list[dict[str, str]]], list[str]]


def toy_recipe(name: str, table: str) -> Callable[[Draw], Draw]:
    """Register ``draw(job, params, rows) -> .md lines`` as recipe ``name``: it gets the declared toy's
    ``params`` and the rows of its ``<table>.csv``; the .md's title, record line and problems are added."""
    def register(draw: Draw) -> Draw:
        @recipe(name)
        def make(job: Job) -> None:
            fig, record = job.figure, toy_record(job)
            lines = [f"# {fig.title or fig.id}", ""]
            if record is not None:
                toy = record.summary["toy"]
                lines += [f"Record: `{job.runs_dir}/{record.path.name}` (toy `{toy}`, seed "
                          f"{record.summary['params'].get('seed')}; `python scripts/toys.py {toy}` writes it).", ""]
                lines += draw(job, record.summary["params"], read_table(record.path / f"{table}.csv"))
            lines += ["", "Missing or failed: " + ("none." if not job.problems else ""), *(f"- {p}" for p in job.problems)]
            job.write_md("\n".join(lines) + "\n")
        return draw
    return register


@toy_recipe("hbn_clusters", "points")
def clusters(job: Job, p: dict, points: list[dict[str, str]]) -> list[str]:
    fig, axes = plt.subplots(1, 4, figsize=(16, 4.2))
    body = []
    for ax, (panel, title) in zip(axes, PANEL_TITLES.items()):
        for k, color in zip((1, 2), COLORS):
            xs = [float(r["x"]) for r in points if r["panel"] == panel and int(r["cluster"]) == k]
            ys = [float(r["y"]) for r in points if r["panel"] == panel and int(r["cluster"]) == k]
            ax.scatter(xs, ys, s=6, alpha=0.6, color=color, label=f"client {k} ({len(xs)} points)")
            body.append([title, str(k), str(len(xs)), f"({cell(statistics.fmean(xs))}, {cell(statistics.fmean(ys))})",
                         f"({cell(statistics.pstdev(xs))}, {cell(statistics.pstdev(ys))})"])
        ax.set_title(title)
        ax.set_aspect("equal", adjustable="datalim")
    axes[0].legend(fontsize=8)
    fig.suptitle(job.figure.title or job.figure.id, fontsize=10)
    fig.tight_layout()
    job.save(fig)
    mix = ", ".join(f"client {k}: {100 * w:.0f} % local / {100 * (1 - w):.0f} % global"
                    for k, w in enumerate(p["local_weights"], start=1))
    return [
        f"Clusters: {p['sizes'][0]} points at {tuple(p['centers'][0])} with std {p['stds'][0]}, {p['sizes'][1]} points "
        f"at {tuple(p['centers'][1])} with std {p['stds'][1]}. Every panel runs the project's HBN layer "
        f"(eps = {p['eps']:g}): (b) `mixing: batch_only`, (c) `global_only` with the global statistics of Eq. 7-8 "
        f"(mean {[round(v, 4) for v in p['global_mean']]}, variance {[round(v, 4) for v in p['global_var']]}), "
        f"(d) Eq. 9's mix of the means and variances ({mix}).", "",
        *md_table(["panel", "client", "points", "mean (x, y)", "std (x, y)"], body,
                  ["---", "---:", "---:", "---:", "---:"]),
    ]


def curve(rows: list[dict[str, str]], client: int, bn: int) -> tuple[list[float], list[float]]:
    picked = [r for r in rows if int(r["client"]) == client and int(r["bn"]) == bn]
    return [float(r["w"]) for r in picked], [float(r["loss"]) for r in picked]


@toy_recipe("fedbn_cos_loss", "curves")
def cos_loss(job: Job, p: dict, rows: list[dict[str, str]]) -> list[str]:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, bn, title, avg in ((axes[0], 0, "without BN (γ = 1)", p["no_bn_w_avg"]),
                               (axes[1], 1, "with local BN (γ = σ̂ₖ)", p["bn_w_avg"])):
        for k, (color, sigma) in enumerate(zip(COLORS, p["sigmas"]), start=1):
            ax.plot(*curve(rows, k, bn), color=color, label=f"client {k} (σ = {sigma:g})")
        ax.axvline(avg, color="gray", linestyle="--", linewidth=1, label=f"average of the optima, w = {avg:.2f}")
        ax.set_xlabel("w")
        ax.set_title(title)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("training loss (squared error)")
    fig.suptitle(job.figure.title or job.figure.id, fontsize=10)
    fig.tight_layout()
    job.save(fig)
    body = [[f"client {k}", cell(p["no_bn_w"][k - 1], 3), cell(p["no_bn_loss_at_own"][k - 1], 4),
             cell(p["no_bn_loss_at_avg"][k - 1], 4), cell(p["bn_gamma"][k - 1], 3), cell(p["bn_w"][k - 1], 3),
             cell(p["bn_loss_at_own"][k - 1], 4)] for k in (1, 2)]
    return [
        setting(p), "",
        *md_table(["", "w* without BN", "loss at w*", f"loss at the average w = {p['no_bn_w_avg']:.3f}",
                   "γ* = σ̂", "w* with BN", "loss at (w*, γ*)"], body, ["---", *["---:"] * 6]),
    ]


def setting(p: dict) -> str:
    return (f"Setting (chosen; the paper gives none): w_true = {p['w_true']:g}, client inputs x = σₖ·u with "
            f"σ = {tuple(p['sigmas'])}, u ~ N(0, 1), y = cos(w_true·u) + ε, ε ~ N(0, {p['noise']:g}²), {p['samples']} "
            "samples per client; model cos(w·x/γ), BN's γ = the client's empirical std. Why this reading: "
            "`src/fedbn_bench/toy/cos_bn.py`.")


@toy_recipe("fedbn_cos_surface", "surface")
def cos_surface(job: Job, p: dict, rows: list[dict[str, str]]) -> list[str]:
    ws = [float(k.removeprefix("w=")) for k in rows[0] if k != "gamma"]
    gammas = [float(r["gamma"]) for r in rows]
    z = [[float(v) for k, v in r.items() if k != "gamma"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 5))
    mesh = ax.pcolormesh(ws, gammas, z, shading="auto", cmap="viridis")
    fig.colorbar(mesh, ax=ax, label="client 1's training loss")
    w_avg, g_avg, g1 = p["bn_w_avg"], p["bn_gamma_avg"], p["bn_gamma"][0]
    marks = [((p["bn_w"][0], g1), "o", "client 1 optimum (w₁*, γ₁*)"),
             ((p["bn_w"][1], p["bn_gamma"][1]), "s", "client 2 optimum (w₂*, γ₂*)"),
             ((w_avg, g_avg), "X", "average (w̄, γ̄)"), ((w_avg, g1), "*", "(w̄, γ₁*)")]
    for (x, y), marker, label in marks:
        ax.scatter([x], [y], marker=marker, s=80, color="white", edgecolor="black", label=label, zorder=3)
    ax.set_xlabel("w")
    ax.set_ylabel("γ")
    ax.set_title(job.figure.title or job.figure.id, fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    job.save(fig)
    loss = p["client1_loss"]
    body = [["(w₁*, γ₁*)", cell(p["bn_w"][0], 3), cell(g1, 3), cell(loss["own"], 4)],
            ["(w̄, γ̄)", cell(w_avg, 3), cell(g_avg, 3), cell(loss["avg_w_avg_gamma"], 4)],
            ["(w̄, γ₁*)", cell(w_avg, 3), cell(g1, 3), cell(loss["avg_w_local_gamma"], 4)]]
    return [
        setting(p) + f" Surface: w ∈ [{p['w_range'][0]:g}, {p['w_range'][1]:g}] × γ ∈ [{p['gamma_range'][0]:g}, "
        f"{p['gamma_range'][1]:g}], {len(ws)} × {len(gammas)} points; client 2's optimum (w₂*, γ₂*) = "
        f"({cell(p['bn_w'][1], 3)}, {cell(p['bn_gamma'][1], 3)}).", "",
        *md_table(["point", "w", "γ", "client 1's loss"], body, ["---", "---:", "---:", "---:"]),
    ]
