"""The convergence rule of the claims, declared once (:data:`RULE`): whether a check's value was still moving
at the end of its runs, in the direction that would change its outcome.

A quantity's curve is the per-evaluation column its metric reads (:func:`curve_column`), on the rounds where
every completed run of the quantity has a value (a diverged run has ended and has no trend; a mean counting it
moves by the completed runs' share of the line, :func:`of_mean`). Its window is
the last fifth of those evaluations, at least five, but never more than the last half (rounded up). Its :class:`Trend` is a
least-squares line through the window, one per run with a common slope (each run's own level removed), and
its noise is the scatter of the runs' points around their lines: the slope's standard error, with
``runs × evaluations − runs − 1`` degrees of freedom. Both are read as the change the line makes across the
window (slope × the window's span in rounds × the quantity's scale). A quantity that keeps its best value
(``best:``, the best test accuracy, an accuracy at the best validation round) cannot fall: it follows a
rising line and stays where its line falls.

A check's :class:`Drift` is the change of its value (``a − b``, ``|a − b|`` or ``a / b``, linearised at the
means) that its quantities' trends make across their windows, toward passing or against it; its standard
error adds the quantities' variances, with Welch–Satterthwaite degrees of freedom. A drift is significant
when it exceeds its standard error times Student's t at 0.975 (one-sided 2.5 % on a flat curve). A failing
check whose drift toward passing is significant is not converged, and so is a passing check whose drift against
it is significant and larger than its margin. A claim fails (not converged) when every check it fails is not
converged (one converged fail decides it), and holds (not converged) when one check it passes is not converged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional, Sequence

from scipy import stats

from fedbn_bench.records.reader import RunRecord

RULE = ("A quantity's **trend** is a least-squares line through the last fifth of the evaluations of its curve "
        "(the per-evaluation column its metric reads; at least the last five evaluations, at most the last half), one line "
        "per completed run with a common slope, and its noise is the scatter of the runs' own points around their "
        "lines (the slope's standard error, runs × evaluations − runs − 1 degrees of freedom); both are read as the "
        "change across the window; a diverged run counted in a quantity keeps the value it ended with, so the "
        "quantity's mean moves by that line times the completed runs' share of its runs. A quantity that keeps its "
        "best (best accuracy, accuracy at the best validation round) cannot fall: it moves by what its best would "
        "gain if its line went on for one more window (nothing where the line stays below the best). A quantity whose curve has fewer than ten evaluations (a window of "
        "five within its last half), or no scatter around a moving line, has **no trend to tell**: a claim it "
        "decides reads *fails / holds (too few evaluations to tell)* with the evaluations that would decide it, "
        "never a silent verdict. A check that passes by less than its standard error over seeds (each side's "
        "sd / √n) reads *holds (within seed noise)*; a fail whose every failing check fails by less than it reads "
        "*fails (within seed noise)*. A check's **drift** is the change of its value (a − b, |a − b| or a / b) that its "
        "quantities' trends make, toward passing or against; it is **significant** when larger than its standard "
        "error (the quantities' errors added; Welch–Satterthwaite degrees of freedom) times Student's t at 0.975. "
        "A claim **fails (not converged)** when every check it fails drifts significantly toward passing, and "
        "**holds (not converged)** when a check it passes drifts significantly against it by more than its margin; "
        "its section states the run length that would decide it.")
"""The rule as CLAIMS.md states it (module docstring)."""

RULE_CHANGE = (
    "Rule history: this rule replaced (issue 49) the rule of commit 0663577, which compared the best of the last "
    "fifth with its first evaluation against the seeds' standard error (at least 0.5 % of the unit), read every "
    "quantity of a failing check whatever its direction, made a fail not converged on one such check, and never "
    "read a passing check. On the runs committed at 2582162 it flipped 23 verdicts from *fails (not converged)* "
    "to *fails* and no other: fbn/fig4_fbn_undefended_degrades, fbn/fig4_sf_defense_beats_undefended, "
    "fbn/fig8_foe_defense_beats_undefended, fbn/fig10_alie_defense_beats_undefended, "
    "fixbn/sec3_4_pooled_statistics, hbn/table1_phi0.1, hbn/table1_phi0.6, hbn/table2_batch_size, "
    "hbn/table4_fedprox, hbn/table4_scaffold, hbn/table4_fedadam, hbn/table6_ablation, "
    "fedrbn/table2_fatbn_vs_fatavg, fedrbn/fig6_lambda_20, fedrbn/fig1_20_close_to_all, fedrbn/fig3a_at_domain, "
    "fedrbn/table1_bna_over_bnc, fedrbn/table1_cos_over_uni, fedrbn/table4_free_at, fedrbn/table7_b_e, "
    "fedrbn/fig8_fewer_users, fedbn/table11_vs_fedavg, fedbn/table11_vs_fedprox (their checks' own drift toward "
    "passing is not significant: both sides of a gap rising together, the moving side moving away, or too few "
    "evaluations to tell).")
"""How the rule came to be, as CLAIMS.md states it (the flips measured when it was committed)."""

RULE_CHANGE_57 = (
    "Issue 57 changed the rule in a commit of its own, before any run was re-read: a quantity needs at least ten "
    "evaluations (a window of five) and scatter around its line for a trend, else its claim reads *too few "
    "evaluations to tell*; a quantity that keeps its best drifts by what its best would gain, not by its raw slope; "
    "a hold inside its seeds' noise says so. On the runs committed at a3e366c it flipped 23 verdicts and no other: "
    "to *holds (too few evaluations to tell)* from *holds*: fbn/fig3a_naive_collapses, "
    "fbn/fig3a_fbn_matches_centralized, fbn/fig3a_fixbn_between, fbn/fig3a_gamma001, fbn/fig3a_iid_all_similar, "
    "fbn/fig4_naive_no_defense, fbn/fig4_naive_defended, fbn/fig5a_dirichlet, fbn/parity_authors_code, "
    "fixbn/table1_bn_gap, fixbn/table1_gn_close, fixbn/fig3_shards, fixbn/fig3_dirichlet, fixbn/table_h_freeze_affine, "
    "fixbn/fig_i_maintained_momentum, hbn/table4_fedsam, hbn/sec5_random_samples, hbn/fig5_small_lambda_low_c; to "
    "*fails (too few evaluations to tell)* from *fails*: hbn/table1_phi0.1, hbn/table1_phi0.6; to *holds (within "
    "seed noise)* from *holds*: fedrbn/fig6_lambda_20, fedbn/fig4a_accuracy_falls_with_e, fedbn/table12_centralized.")
"""The issue-57 change of the rule and the verdicts it flipped (measured on the committed runs before committing it)."""

RULE_CHANGE_DIVERGED = (
    "**Diverged runs in a trend**: a quantity's trend was its completed runs' line, applied in full to a mean that "
    "also counts its diverged runs at the values they ended with; since issue 57 (a commit of its own, no run added "
    "or re-read) it is scaled by the completed runs' share. On the runs committed at 2b6b0a4 it flips no verdict "
    "and changes the drift of 5 checks: fbn/fig3a_fixbn_between (toward passing +6.74 to +5.52; against +2.23 to "
    "+1.02, both still significant), fbn/fig4_fbn_undefended_degrades, fbn/fig4_sf_defense_beats_undefended (both "
    "still not significant) and the superseded T* = 50 % declaration of fixbn/fig1_fixbn_recovers (+18.60 to +12.15, "
    "still significant).")
"""The diverged-run change of the rule and what it moved (measured on the committed runs before committing it)."""

WINDOW_FIFTH, WINDOW_LEAST = 5, 5
"""The window: the last 1/5 of the evaluations, at least 5, at most the last half."""

CONFIDENCE = 0.975
"""Student's t quantile a significant drift exceeds (in standard errors)."""

SUMMARY_CURVES = {"final_test_acc": "test_acc", "best_test_acc": "test_acc", "test_acc_at_best_val": "test_acc",
                  "clean_acc_at_best_val": "clean_acc", "robust_acc_at_best_val": "val_robust_acc"}
"""The column whose curve a ``summary:`` metric ends (robust accuracy: the validation RA the run selects on)."""

KEEPS_BEST = ("summary:best_test_acc", "summary:test_acc_at_best_val", "summary:clean_acc_at_best_val",
              "summary:robust_acc_at_best_val")
"""Summary metrics that keep the best evaluation (with ``best:<column>``): they cannot fall."""


@dataclass(frozen=True)
class Trend:
    """A quantity's line through its window: ``change`` across the window ± ``se``, in the quantity's units."""

    last_round: float
    change: float
    se: float
    df: int
    evaluations: int
    runs: int
    rises_only: bool = False
    """The quantity keeps its best value: it can rise with the curve, never fall."""
    best_gain: float = 0.0
    best_gain_se: float = 0.0
    """With ``rises_only``: what the runs' mean best would gain (± its standard error) if their line went on for
    one more window; negative where the line would stay below the best."""
    noise: float = 0.0
    """The runs' scatter around their lines (a standard deviation, in the quantity's units)."""

    @property
    def untold(self) -> str:
        """Why the trend cannot be weighed (empty: it can): a line with no scatter around it that still moves."""
        still = self.se <= 1e-9 * abs(self.change) and self.change != 0
        return "no scatter around its moving line (a zero standard error)" if still else ""


@dataclass(frozen=True)
class Drift:
    """The change of a check's value across the window in one direction (toward passing or against it)."""

    change: float
    se: float
    df: float

    @property
    def significant(self) -> bool:
        if self.change <= 0:
            return False
        return self.se == 0 or self.change > stats.t.ppf(CONFIDENCE, self.df) * self.se


def curve_column(metric: str) -> Optional[str]:
    """The column whose curve ``metric`` follows (``None`` where none does: ``first:``, ``rises:``, ``reach:``, a
    round fixed once reached, other summary keys)."""
    kind, _, key = metric.partition(":")
    if kind == "summary":
        return SUMMARY_CURVES.get(key)
    return None if kind in ("first", "rises", "reach") else key


def common_curves(runs: Sequence[RunRecord], column: str) -> tuple[list[float], list[list[float]]]:
    """``(rounds, one curve per run)`` of ``column`` over the rounds where every run has a finite value."""
    curves = []
    for run in runs:
        rounds, values = run.curve(column)
        curves.append({r: v for r, v in zip(rounds, values) if not math.isnan(v)})
    if not curves:
        return [], []
    common = sorted(set.intersection(*(set(c) for c in curves)))
    return common, [[c[r] for r in common] for c in curves]


def window_size(evaluations: int) -> int:
    """The window of a curve of ``evaluations`` points (module docstring)."""
    return min(math.ceil(evaluations / 2), max(WINDOW_LEAST, math.ceil(evaluations / WINDOW_FIFTH)))


def line_trend(rounds: Sequence[float], curves: Sequence[Sequence[float]], scale: float = 1.0,
               rises_only: bool = False) -> Optional[Trend]:
    """The trend of ``curves`` (one per run, all at ``rounds``) over their window; ``None`` where the window is shorter
    than :data:`WINDOW_LEAST` evaluations (a curve of fewer than twice as many) or leaves no degree of freedom."""
    n = len(curves)
    size = window_size(len(rounds))
    df = n * size - n - 1
    if n == 0 or size < WINDOW_LEAST or df < 1:
        return None
    x = [float(r) for r in rounds[-size:]]
    x_mean = sum(x) / size
    dx = [r - x_mean for r in x]
    sxx = sum(d * d for d in dx)
    levels = [sum(c[-size:]) / size for c in curves]
    centred = [[v - level for v in c[-size:]] for c, level in zip(curves, levels)]
    slope = sum(d * v for c in centred for d, v in zip(dx, c)) / (n * sxx)
    scatter = sum((v - slope * d) ** 2 for c in centred for d, v in zip(dx, c)) / df
    span = (x[-1] - x[0]) * scale
    slope_se = math.sqrt(scatter / (n * sxx))
    ahead = x[-1] - x_mean + (x[-1] - x[0])   # from the window's centre to the end of one more window
    gain = sum(level + slope * ahead - max(c) for c, level in zip(curves, levels)) / n
    gain_se = math.sqrt(scatter / (n * size) + (slope_se * ahead) ** 2)
    return Trend(x[-1], slope * span, slope_se * span, df, size, n, rises_only,
                 gain * scale, gain_se * abs(scale), math.sqrt(scatter) * abs(scale))


def of_mean(found: Optional[Trend], moving: int, counted: int) -> Optional[Trend]:
    """The trend of a mean over ``counted`` runs of which only ``moving`` go on (a diverged run counted at the value
    it ended with never moves): ``found``, the moving runs' trend, scaled by their share; their scatter unchanged."""
    if found is None or moving >= counted:
        return found
    share = moving / counted
    return replace(found, change=found.change * share, se=found.se * share, best_gain=found.best_gain * share,
                   best_gain_se=found.best_gain_se * share)


def evaluations_needed() -> int:
    """The fewest evaluations a curve needs for a trend: a window of :data:`WINDOW_LEAST` within its last half."""
    return 2 * WINDOW_LEAST


def trend(runs: Sequence[RunRecord], metric: str, scale: float) -> Optional[Trend]:
    """The trend of one quantity on its completed ``runs`` (``None`` where its metric follows no curve or the
    window is too short)."""
    column = curve_column(metric)
    if column is None or not runs:
        return None
    rounds, curves = common_curves(runs, column)
    return line_trend(rounds, curves, scale, metric in KEEPS_BEST or metric.startswith("best:"))


def detectable(runs: int, size: int, power: float = 0.8) -> float:
    """The smallest change across a window of ``size`` evenly spaced evaluations of ``runs`` runs that the rule reads
    significant with probability ``power``, in units of the noise's standard deviation per evaluation. The rule's
    statistic is a noncentral t: the change's estimate over its estimated standard error, with ``runs × size − runs
    − 1`` degrees of freedom and noncentrality the true change over its true standard error, σ √(12 (k − 1) /
    (n k (k + 1)))."""
    from scipy.optimize import brentq

    df = runs * size - runs - 1
    critical = stats.t.ppf(CONFIDENCE, df)
    ncp = brentq(lambda d: stats.nct.sf(critical, df, d) - power, 0.0, 100.0)
    return ncp * math.sqrt(12 * (size - 1) / (runs * size * (size + 1)))


def untold(runs: Sequence[RunRecord], metric: str, found: Optional[Trend]) -> str:
    """Why a quantity whose metric follows a curve has no trend that can be weighed (empty: it has one, or its
    metric follows no curve and needs none): too few evaluations, or no scatter around a moving line."""
    column = curve_column(metric)
    if column is None or not runs:
        return ""
    if found is None:
        count = len(common_curves(runs, column)[0])
        return (f"{count} evaluation{'s' if count != 1 else ''} in common; a trend needs at least "
                f"{evaluations_needed()} evaluations")
    return found.untold


def coefficients(relation: str, a: float, b: float) -> tuple[float, float]:
    """How a check's value, signed so that larger is closer to passing, moves with ``a`` and with ``b``."""
    if relation == "at_least":
        return 1.0, -1.0
    if relation == "at_most":
        return -1.0, 1.0
    if relation == "within":
        side = 1.0 if a >= b else -1.0
        return -side, side
    return (-1.0 / b, a / (b * b)) if b else (0.0, 0.0)   # ratio_at_most: −a/b


def drift(relation: str, a: float, b: float, trends: tuple[Optional[Trend], Optional[Trend]],
          toward_passing: bool) -> Optional[Drift]:
    """The drift of a check with means ``a`` and ``b`` and their quantities' ``trends`` (``None`` for a number or
    an unread trend), toward passing or against it; ``None`` where no trend moves it (a quantity that keeps its
    best moves only by what its best would gain: :func:`moved`)."""
    sense = 1.0 if toward_passing else -1.0
    parts = [(sense * c, moved(t)) for c, t in zip(coefficients(relation, a, b), trends) if t is not None and c != 0]
    parts = [(c, m) for c, m in parts if m is not None]
    if not parts:
        return None
    change = sum(c * m[0] for c, m in parts)
    variances = [(c * m[1]) ** 2 for c, m in parts]
    total = sum(variances)
    denominator = sum(v * v / m[2] for v, (_, m) in zip(variances, parts))
    df = total * total / denominator if denominator > 0 else float(min(m[2] for _, m in parts))
    return Drift(change, math.sqrt(total), df)


def moved(t: Trend) -> Optional[tuple[float, float, int]]:
    """``(change, se, df)`` a quantity's trend moves it by: its line's change across the window, or for a quantity
    that keeps its best, what its best would gain in one more window (``None`` where it would gain nothing)."""
    if not t.rises_only:
        return t.change, t.se, t.df
    return (t.best_gain, t.best_gain_se, t.df) if t.best_gain > 0 else None
