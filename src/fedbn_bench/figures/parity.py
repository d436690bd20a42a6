"""Parity of fedbn-bench with an author's code (``scripts/parity/compare.py``, ``results/parity/``): the runs
of both sides grouped by method (``norm.name``, which the authors' records carry too,
``records/reference_log.py``), each method's final test accuracy (or another summary accuracy, ``metric``:
FedRBN's code tests its best validation round only, ``robust_acc_at_best_val``) as mean ± sd over the seeds
(completed runs only), the difference ours − theirs and Welch's t of it (unequal variances,
Welch–Satterthwaite degrees of freedom, two-sided p), and the accuracy curves of both sides."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Optional, Sequence

from scipy import stats

from fedbn_bench.figures.base import COMPLETED, cell, md_table, mean_std
from fedbn_bench.records.reader import RunRecord


@dataclass(frozen=True)
class Welch:
    """Welch's two-sample t test of ``mean(a) − mean(b)``."""

    t: float
    dof: float
    p: float


def welch(a: Sequence[float], b: Sequence[float]) -> Optional[Welch]:
    """Welch's t of ``mean(a) − mean(b)``; ``None`` when a side has fewer than two values or both have
    no spread (no standard error)."""
    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return None
    t = (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return Welch(t, dof, float(2 * stats.t.sf(abs(t), dof)))


def method_of(run: RunRecord) -> str:
    """The method a run belongs to: its ``norm.name`` (``?`` when it has none)."""
    return str(run.get("norm.name", "?"))


FINAL = "final_test_acc"


def summary_accuracy(runs: Sequence[RunRecord], metric: str = FINAL) -> list[float]:
    """The summary accuracy ``metric`` (%) of the completed ``runs`` that have it."""
    return [100.0 * r.summary[metric] for r in runs if r.status == COMPLETED and r.summary.get(metric) is not None]


@dataclass
class Comparison:
    """One method's runs on both sides."""

    method: str
    authors: list[RunRecord]
    ours: list[RunRecord]
    metric: str = FINAL

    @property
    def difference(self) -> Optional[float]:
        """Mean accuracy, ours − theirs (points)."""
        (a, _), (b, _) = (mean_std(summary_accuracy(runs, self.metric)) for runs in (self.ours, self.authors))
        return None if a is None or b is None else a - b

    @property
    def test(self) -> Optional[Welch]:
        return welch(summary_accuracy(self.ours, self.metric), summary_accuracy(self.authors, self.metric))

    def not_counted(self) -> list[str]:
        """The runs left out (not completed), named with their side and status."""
        return [f"{side} {run.path.name}: {run.status_text}" for side, runs in (("authors", self.authors),
                                                                               ("ours", self.ours))
                for run in runs if run.status != COMPLETED]


def compare(authors: Sequence[RunRecord], ours: Sequence[RunRecord], metric: str = FINAL) -> list[Comparison]:
    """The methods either side ran, sorted, each with its runs on both sides, compared by ``metric``."""
    methods = sorted({method_of(r) for r in [*authors, *ours]})
    return [Comparison(m, [r for r in authors if method_of(r) == m], [r for r in ours if method_of(r) == m],
                       metric) for m in methods]


def accuracy_text(runs: Sequence[RunRecord], metric: str = FINAL) -> str:
    """``mean ± sd (n)`` of the accuracy ``metric`` in %, ``–`` without a completed run."""
    values = summary_accuracy(runs, metric)
    mean, sd = mean_std(values)
    return "–" if mean is None else f"{cell(mean)} ± {cell(sd)} ({len(values)})"


def implementation(runs: Sequence[RunRecord]) -> str:
    """What ran a method: the authors' script, or our norm with its variant."""
    names = set()
    for run in runs:
        if run.get("implementation"):
            names.add(str(run.get("implementation")))
        else:
            variant = run.get("norm.variant")
            names.add(f"norm={method_of(run)}" + (f" variant={variant}" if variant else ""))
    return ", ".join(sorted(names)) or "–"


def table(comparisons: Sequence[Comparison]) -> list[str]:
    """The markdown table: per method both implementations, the compared accuracy (its summary key in the header
    unless it is the final one), difference and Welch's t."""
    metrics = sorted({c.metric for c in comparisons} - {FINAL})
    label = ", ".join(metrics) if metrics else "final acc"
    rows = []
    for c in comparisons:
        test = c.test
        rows.append([c.method, implementation(c.authors), implementation(c.ours), accuracy_text(c.authors, c.metric),
                     accuracy_text(c.ours, c.metric), cell(c.difference, sign=True),
                     "–" if test is None else f"{test.t:+.2f} ({test.dof:.1f})",
                     "–" if test is None else f"{test.p:.2f}"])
    return md_table(["method", "authors' code", "fedbn-bench", f"theirs: {label} % (seeds)",
                     f"ours: {label} % (seeds)", "ours − theirs", "Welch t (dof)", "p"], rows,
                    ["---", "---", "---", "---:", "---:", "---:", "---:", "---:"])
