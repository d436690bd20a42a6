"""Recipe ``fedrbn_table``: FedRBN Table 2, ours next to the paper's (was ``scripts/fedrbn_table.py``).

A run's method and setting are its sweep overrides ``experiment/fedrbn/method`` and
``experiment/fedrbn/setting``; RA and SA are FedRBN's reported numbers, the robust and clean accuracy
at the best validation round (``*_at_best_val``: RA for AT users, SA for ST users,
``metrics/robust_accuracy.py``), averaged over seeds; ``T`` is ``train_macs_per_round`` (MACs of one
round = one epoch of every user) in 10^12. Every paper row of the chosen setting (declaration:
``paper_where={"setting": ...}``) appears (``missing`` without a run); a run that did not complete
keeps its row and its status, and is named.

Writes ``table.csv`` beside the .md, the .md, and the image (RA and SA, ours and the paper's; RA per
evaluation).
"""
from __future__ import annotations

import csv
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fedbn_bench.figures.base import Job, recipe  # noqa: E402
from fedbn_bench.records.reader import RunRecord  # noqa: E402

COLUMNS = ["method", "label", "runs", "status", "rounds", "ra", "sa", "final_ra", "final_sa", "t",
           "paper_ra", "paper_sa", "paper_t", "ra_minus_paper", "sa_minus_paper"]
EXTRA_LABELS = {"fedrbn_wo_prop": "FedRBN w/o prop", "local_at": "local AT"}


def mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def pct(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 2)


def table(runs: list[RunRecord], setting: str, paper: dict[str, dict[str, str]]) -> list[dict]:
    """One row per method: the paper's rows of ``setting`` (``paper``, by method) first, then methods
    only we ran, then runs of other settings as ``<method>@<setting>`` (e.g. ``fatavg@none``, no AT user)."""
    by_method: dict[str, list[RunRecord]] = {}
    for run in runs:
        method = run.override("experiment/fedrbn/method") or "unknown"
        run_setting = run.override("experiment/fedrbn/setting")
        key = method if run_setting in (None, setting) else f"{method}@{run_setting}"
        by_method.setdefault(key, []).append(run)
    rows = []
    for method in [*paper, *sorted(set(by_method) - set(paper))]:
        group = by_method.get(method, [])
        done = [r for r in group if r.status == "completed"]
        statuses = sorted({r.status for r in group})
        p = paper.get(method, {})
        base, _, other = method.partition("@")
        label = p.get("label") or paper.get(base, {}).get("label") or EXTRA_LABELS.get(base, base)
        row = {
            "method": method, "label": f"{label} [{other}]" if other else label, "runs": len(group),
            "status": "missing" if not group else ",".join(statuses),
            "rounds": max((r.summary.get("rounds_completed", 0) for r in group), default=None),
            "ra": pct(mean([r.summary["robust_acc_at_best_val"] for r in done if "robust_acc_at_best_val" in r.summary])),
            "sa": pct(mean([r.summary["clean_acc_at_best_val"] for r in done if "clean_acc_at_best_val" in r.summary])),
            "final_ra": pct(mean([r.summary["final_robust_acc"] for r in done if "final_robust_acc" in r.summary])),
            "final_sa": pct(mean([r.summary["final_test_acc"] for r in done if r.summary.get("final_test_acc") is not None])),
            "t": None,
            "paper_ra": float(p["ra"]) if p else None, "paper_sa": float(p["sa"]) if p else None,
            "paper_t": float(p["t"]) if p else None,
        }
        macs = [r.summary["train_macs_per_round"] for r in done if "train_macs_per_round" in r.summary]
        row["t"] = round(mean(macs) / 1e12, 3) if macs else None
        for key in ("ra", "sa"):
            ours, ref = row[key], row[f"paper_{key}"]
            row[f"{key}_minus_paper"] = None if ours is None or ref is None else round(ours - ref, 2)
        rows.append(row)
    return rows


def markdown(rows: list[dict], setting: str, runs_dir, problems: list[str]) -> str:
    def cell(v):
        return "–" if v is None else str(v)

    lines = [f"# FedRBN Table 2, setting `{setting}`: ours (reduced) vs the paper (Digits)", "",
             f"Runs: `{runs_dir}`. RA/SA: robust/clean accuracy (%) at the best validation round (RA for AT "
             "users, SA for ST users), averaged over users and seeds; final_*: at the last round; T: MACs of "
             "one round (one epoch of every user) in 10^12.", "",
             "| " + " | ".join(COLUMNS[1:]) + " |", "|" + "---|" * (len(COLUMNS) - 1)]
    lines += ["| " + " | ".join(cell(r[c]) for c in COLUMNS[1:]) + " |" for r in rows]
    lines += ["", "Missing or failed runs: " + ("none." if not problems else ""), *(f"- {p}" for p in problems)]
    return "\n".join(lines) + "\n"


def figure(job: Job, rows: list[dict]) -> None:
    ran = [r for r in rows if r["ra"] is not None]
    fig, (bars, curves) = plt.subplots(1, 2, figsize=(12, 4.2))
    x = range(len(ran))
    for offset, key, label in ((-0.3, "ra", "RA ours"), (-0.1, "paper_ra", "RA paper"),
                               (0.1, "sa", "SA ours"), (0.3, "paper_sa", "SA paper")):
        bars.bar([i + offset for i in x], [r[key] or 0 for r in ran], width=0.2, label=label,
                 hatch="//" if "paper" in key else None, alpha=0.85)
    bars.set_xticks(list(x), [r["label"] for r in ran], rotation=20, ha="right")
    bars.set_ylabel("accuracy (%)")
    bars.legend(fontsize=8)
    bars.set_title("best-validation round")
    for run in job.runs:
        rounds, ra = run.curve("robust_acc")
        if not rounds:  # adversarial.robust_test=best_val: no test RA per round, the AT users' validation RA
            rounds, ra = run.curve("val_robust_acc")
        if rounds:
            curves.plot(rounds, [100 * v for v in ra], marker="o", label=run.override("experiment/fedrbn/method"))
    curves.set_xlabel("round")
    curves.set_ylabel("robust accuracy (%)")
    curves.legend(fontsize=8)
    curves.set_title("RA per evaluation (test, or the AT users' validation)")
    fig.tight_layout()
    job.save(fig)


@recipe("fedrbn_table")
def make(job: Job) -> None:
    """Options: none; ``paper_where={"setting": ...}`` picks the setting."""
    setting = job.figure.paper_where["setting"]
    rows = table(job.runs, setting, job.paper_rows())
    for row in rows:
        if row["status"] == "missing":
            job.problem(f"{row['label']}: no run (missing)")
        elif row["status"] != "completed":
            job.problem(f"{row['label']}: {row['runs']} run(s), status {row['status']} (only completed runs are averaged)")
    job.out.mkdir(parents=True, exist_ok=True)
    with (job.out / "table.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    job.written.append(job.out / "table.csv")
    job.write_md(markdown(rows, setting, job.runs_dir, job.problems))
    figure(job, rows)


