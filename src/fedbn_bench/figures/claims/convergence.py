"""The convergence rule of the claims, declared once (:data:`RULE`): whether a quantity's runs were still
improving at their last evaluation, so that a claim failing on them reads *fails (not converged)*.

The curve a quantity is judged on is the per-evaluation column its metric reads (:func:`curve_column`);
the runs' curves are averaged over the evaluation rounds they all have, and the last fifth of those
evaluations (at least the last two) is the window. Improvement is the best value of the window minus
its first value (lower is better for a column whose name contains ``loss``). The noise it must beat is
the standard error of the quantity's mean over those runs (sample sd / √n, the noise of the averaged
curve whose gain is read), and never less than 0.5 % of the metric's unit (0.5 points of an accuracy
in %, 0.005 of a loss): with one run, or seeds that happen to agree, a step of 0.3 points is still
noise. Only completed runs are read: a diverged run has ended and has no trend.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Optional, Sequence

from fedbn_bench.records.reader import RunRecord

RULE = ("A quantity is **still improving** when, on its curve averaged over its runs (the per-evaluation column "
        "its metric reads), the best of the last fifth of the evaluations (at least the last two) beats the first "
        "of them by more than the noise: the standard error of the mean over its completed runs (sd / √n), and at "
        "least 0.5 % of its unit (0.5 points of accuracy; lower is better for a loss). A claim **fails (not converged)** when a check it "
        "fails reads a still-improving quantity; its section states the run length that would decide it.")
"""The rule as CLAIMS.md states it (module docstring)."""

NOISE_FLOOR = 0.005
"""The least noise, as a fraction of the metric's unit (× the quantity's scale)."""

SUMMARY_CURVES = {"final_test_acc": "test_acc", "best_test_acc": "test_acc", "test_acc_at_best_val": "test_acc",
                  "clean_acc_at_best_val": "clean_acc", "robust_acc_at_best_val": "val_robust_acc"}
"""The column whose curve a ``summary:`` metric ends (robust accuracy: the validation RA the run selects on)."""


@dataclass(frozen=True)
class Progress:
    """What the rule read on one quantity: the window's last round, its improvement and the noise."""

    last_round: float
    gain: float
    noise: float

    @property
    def improving(self) -> bool:
        return self.gain > self.noise


def curve_column(metric: str) -> Optional[str]:
    """The column whose curve ``metric`` reads (``None`` where no curve ends in it: ``first:``, other summary keys)."""
    kind, _, key = metric.partition(":")
    if kind == "summary":
        return SUMMARY_CURVES.get(key)
    return None if kind == "first" else key


def mean_curve(runs: Sequence[RunRecord], column: str) -> tuple[list[float], list[float]]:
    """``(rounds, mean values)`` of ``column`` over the rounds where every run has a finite value."""
    curves = []
    for run in runs:
        rounds, values = run.curve(column)
        curves.append({r: v for r, v in zip(rounds, values) if not math.isnan(v)})
    if not curves:
        return [], []
    common = sorted(set.intersection(*(set(c) for c in curves)))
    return common, [sum(c[r] for c in curves) / len(curves) for r in common]


def progress(runs: Sequence[RunRecord], metric: str, scale: float, measured: Sequence[float]) -> Optional[Progress]:
    """The rule on the completed runs of one quantity (``measured``: the quantity on each of them, scaled);
    ``None`` where it cannot be read (no curve for the metric, fewer than two common evaluations)."""
    column = curve_column(metric)
    if column is None:
        return None
    rounds, values = mean_curve(runs, column)
    if len(values) < 2:
        return None
    window = values[-max(2, math.ceil(len(values) / 5)):]
    sign = -1.0 if "loss" in column else 1.0
    gain = max(sign * (v - window[0]) for v in window) * scale
    se = statistics.stdev(measured) / math.sqrt(len(measured)) if len(measured) > 1 else 0.0
    return Progress(rounds[-1], gain, max(se, NOISE_FLOOR * scale))
