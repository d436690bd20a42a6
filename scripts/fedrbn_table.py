"""Our FedRBN Table 2 next to the paper's, from the runs of ``experiment=fedrbn/table2_mnist`` (or
the paper-scale ``experiment=fedrbn/table2``).

Reads only run records (``fedbn_bench.records.reader``): a run's method and setting are its sweep
overrides ``experiment/fedrbn/method`` and ``experiment/fedrbn/setting``; RA and SA are FedRBN's
reported numbers, the robust and clean accuracy at the best validation round (``*_at_best_val``:
RA for AT users, SA for ST users, ``metrics/robust_accuracy.py``), averaged over seeds; ``T`` is
``train_macs_per_round`` (MACs of one round = one epoch of every user) in 10^12. Every paper row of
the chosen setting appears (``missing`` without a run); a run that did not complete keeps its row
and its status.

Writes ``table.csv``, ``table.md`` and ``table2.png`` (RA and SA, ours and the paper's; RA per
evaluation) into ``--out``.

Usage: ``python scripts/fedrbn_table.py [--runs results/fedrbn/table2_mnist/runs]
[--out results/fedrbn/table2_mnist] [--setting digits_20]``.
"""
from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fedbn_bench.records.reader import RunRecord, read_runs  # noqa: E402

PAPER = Path(__file__).resolve().parents[1] / "conf" / "experiment" / "fedrbn" / "table2_paper.csv"
COLUMNS = ["method", "label", "runs", "status", "rounds", "ra", "sa", "final_ra", "final_sa", "t",
           "paper_ra", "paper_sa", "paper_t", "ra_minus_paper"]
EXTRA_LABELS = {"fedrbn_wo_prop": "FedRBN w/o prop", "local_at": "local AT"}


def paper_rows(setting: str) -> dict[str, dict[str, str]]:
    with PAPER.open() as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return {r["method"]: r for r in rows if r["setting"] == setting}


def mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def pct(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 2)


def table(runs: list[RunRecord], setting: str) -> list[dict]:
    """One row per method: the paper's rows of ``setting`` first, then methods only we ran, then
    runs of other settings as ``<method>@<setting>`` (e.g. ``fatavg@none``, no AT user)."""
    paper = paper_rows(setting)
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
        label = p.get("label") or paper_rows(setting).get(base, {}).get("label") or EXTRA_LABELS.get(base, base)
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
        row["ra_minus_paper"] = None if row["ra"] is None or row["paper_ra"] is None else round(row["ra"] - row["paper_ra"], 2)
        rows.append(row)
    return rows


def markdown(rows: list[dict], setting: str, runs_dir: Path) -> str:
    def cell(v):
        return "–" if v is None else str(v)

    lines = [f"# FedRBN Table 2, setting `{setting}`: ours (reduced) vs the paper (Digits)", "",
             f"Runs: `{runs_dir}`. RA/SA: robust/clean accuracy (%) at the best validation round (RA for AT "
             "users, SA for ST users), averaged over users and seeds; final_*: at the last round; T: MACs of "
             "one round (one epoch of every user) in 10^12.", "",
             "| " + " | ".join(COLUMNS[1:]) + " |", "|" + "---|" * (len(COLUMNS) - 1)]
    lines += ["| " + " | ".join(cell(r[c]) for c in COLUMNS[1:]) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def figure(rows: list[dict], runs: list[RunRecord], out: Path) -> None:
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
    for run in runs:
        rounds, ra = run.curve("robust_acc")
        if rounds:
            curves.plot(rounds, [100 * v for v in ra], marker="o", label=run.override("experiment/fedrbn/method"))
    curves.set_xlabel("round")
    curves.set_ylabel("robust accuracy (%)")
    curves.legend(fontsize=8)
    curves.set_title("RA per evaluation")
    fig.tight_layout()
    fig.savefig(out / "table2.png", dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=Path("results/fedrbn/table2_mnist/runs"))
    parser.add_argument("--out", type=Path, default=Path("results/fedrbn/table2_mnist"))
    parser.add_argument("--setting", default="digits_20")
    args = parser.parse_args()
    runs = read_runs(args.runs)
    rows = table(runs, args.setting)
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "table.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    (args.out / "table.md").write_text(markdown(rows, args.setting, args.runs))
    figure(rows, runs, args.out)
    print((args.out / "table.md").read_text())


if __name__ == "__main__":
    main()
