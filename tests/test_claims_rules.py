"""The rules that make a verdict say what it knows (``figures/claims/base.py``, ``convergence.py``): a fail whose
checks still drift toward passing reads *fails (not converged)*, a hold drifting against it by more than its
margin *holds (not converged)* (synthetic curves, seeded), a claim whose control passes too reads *uninformative*
(*holds (control not run)* while the control's runs are missing), and a superseded declaration is judged
and shown beside the claim that replaced it. Hand-made run directories, as ``run.py -m`` writes them."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import write_run_record
from fedbn_bench.figures.claims.base import (
    FAILS, FAILS_IN_NOISE, FAILS_UNTOLD, HOLDS, HOLDS_IN_NOISE, HOLDS_NOT_CONVERGED, HOLDS_UNTOLD, NOT_CONVERGED, NOT_RUN,
    OFFLINE, UNCONTROLLED, UNINFORMATIVE, Check, Claim, Control, Quantity, Superseded, judge)
from fedbn_bench.figures.claims.convergence import RULE, curve_column, detectable, line_trend, window_size
from scipy import stats
from fedbn_bench.figures.claims.report import claims_md

RUNS = "results/toy_rules/runs"


def write_run(root: Path, name: str, method: str, curve: list[float], column: str = "test_acc",
              status: str = "completed") -> None:
    """A run whose ``column`` takes the values ``curve`` at rounds 10, 20, ...; its summary ends the curve."""
    write_run_record(root / RUNS / name, [f"+experiment/m={method}"], curve[-1], curve, column=column, status=status)


JITTER = (0.0004, -0.0006, 0.0002, 0.0, -0.0004, 0.0006, -0.0002, 0.0004, -0.0004, 0.0002)


def jittered(curve: list[float]) -> list[float]:
    """``curve`` with a fixed scatter of at most 0.06 points: a line without scatter has no trend to weigh."""
    return [round(v + JITTER[i % len(JITTER)], 6) for i, v in enumerate(curve)]


def q(method: str, metric: str = "summary:final_test_acc", scale: float = 100.0) -> Quantity:
    return Quantity(RUNS, {"+experiment/m": method}, metric, scale)


def gap_claim(threshold: float = 20.0, **kwargs) -> Claim:
    return Claim("fbn/toy", "A beats B.", {}, "hand-made", "p", {"A": q("a"), "B": q("b")},
                 (Check("A", "B", "at_least", threshold, "toy"),), **kwargs)


FLAT_B = [0.40, 0.50, 0.50, 0.50, 0.50]
TRIALS = 200


def trial_verdicts(root: Path, seeds: int, evaluations: int, curve, threshold: float = 0.0) -> list[str]:
    """The verdicts of ``A − 90 ≥ threshold`` over :data:`TRIALS` quantities A, each of ``seeds`` runs whose
    test accuracy (in [0, 1]) is ``curve(rng, evaluations)``; a seeded RNG, every trial's runs in one tree."""
    rng = np.random.default_rng(seeds * 1000 + evaluations)
    for k in range(TRIALS):
        for s in range(seeds):
            write_run(root, f"t{k}s{s}", f"t{k}", list(curve(rng, evaluations)))
    cache: dict = {}
    return [judge(Claim("fbn/toy", "", {}, "", "p", {"A": q(f"t{k}")}, (Check("A", 90.0, "at_least", threshold, ""),),
                        seeds=seeds), root, cache).verdict for k in range(TRIALS)]


@pytest.mark.parametrize("seeds, evaluations", [(1, 11), (3, 11), (1, 31), (1, 600), (3, 600)])
def test_flat_noisy_curves_read_converged(tmp_path, seeds, evaluations):
    """A failing check on a flat curve with 1 point of noise: at least 95 % read *fails*, not *not converged*
    (the rule of 0663577 read 52 % of 1-seed 11-evaluation curves as still improving, 94 % at 600)."""
    verdicts = trial_verdicts(tmp_path, seeds, evaluations, lambda rng, n: 0.5 + 0.01 * rng.standard_normal(n))
    assert verdicts.count(FAILS) >= 0.95 * TRIALS and set(verdicts) <= {FAILS, NOT_CONVERGED}


@pytest.mark.parametrize("seeds, evaluations", [(1, 11), (3, 11), (1, 31), (1, 600), (3, 600)])
def test_rising_curves_read_improving(tmp_path, seeds, evaluations):
    """A failing check on a curve rising by 8 times its own noise across the window (0.4 points, noise 0.05):
    at least 95 % read *not converged* (a fixed 0.5-point noise floor hides such a rise)."""
    window = max(5, math.ceil(evaluations / 5))
    verdicts = trial_verdicts(tmp_path, seeds, evaluations, lambda rng, n: (
        0.5 + 0.004 / (window - 1) * np.arange(n) + 0.0005 * rng.standard_normal(n)))
    assert verdicts.count(NOT_CONVERGED) >= 0.95 * TRIALS


@pytest.mark.parametrize("b_tail, verdict", [
    ([0.50, 0.48, 0.46, 0.44, 0.42], NOT_CONVERGED),   # B falls: A − B rises toward its threshold
    ([0.50, 0.52, 0.54, 0.56, 0.58], FAILS),           # B rises: the check moves away from passing
])
def test_only_the_other_side_of_a_check_moves(tmp_path, b_tail, verdict):
    """A − B ≥ 20 fails with A flat: only B's direction decides whether the check is still moving toward
    passing (a rule reading only A, or B's improvement whatever the check, gets one of these wrong)."""
    write_run(tmp_path, "a0", "a", [0.60] * 10)
    write_run(tmp_path, "b0", "b", jittered([0.50] * 5 + b_tail))
    result = judge(gap_claim(), tmp_path)
    assert result.verdict == verdict and result.check_results == [False]


@pytest.mark.parametrize("b_tail, verdict", [
    ([0.560, 0.571, 0.579, 0.590, 0.600], HOLDS_NOT_CONVERGED),   # B gains 4 points across the window: margin 1
    ([0.582, 0.5845, 0.5855, 0.588, 0.590], HOLDS),               # B gains 0.8 points: margin 2
])
def test_a_hold_drifting_against_it_by_more_than_its_margin_is_not_converged(tmp_path, b_tail, verdict):
    write_run(tmp_path, "a0", "a", [0.80] * 10)
    write_run(tmp_path, "b0", "b", [0.50] * 5 + b_tail)
    result = judge(gap_claim(threshold=19.0), tmp_path)
    assert result.check_results == [True] and result.verdict == verdict
    assert result.unsettled == ([0] if verdict == HOLDS_NOT_CONVERGED else [])


def test_one_converged_failing_check_decides_the_claim(tmp_path):
    """A fails two checks: against B on a curve still rising, against C on flat curves. The flat one is a
    converged fail, so the claim fails whatever A's other check does."""
    write_run(tmp_path, "a0", "a", jittered([0.50] * 5 + [0.52, 0.54, 0.56, 0.58, 0.60]))
    write_run(tmp_path, "b0", "b", [0.50] * 10)
    write_run(tmp_path, "c0", "c", [0.70] * 10)
    checks = (Check("A", "B", "at_least", 20.0, "toy"), Check("C", "B", "at_most", 10.0, "toy"))
    claim = Claim("fbn/toy", "", {}, "", "p", {"A": q("a"), "B": q("b"), "C": q("c")}, checks)
    assert judge(claim, tmp_path).verdict == FAILS
    assert judge(Claim("fbn/toy", "", {}, "", "p", claim.quantities, checks[:1]), tmp_path).verdict == NOT_CONVERGED


@pytest.mark.parametrize("metric, verdict", [("summary:final_test_acc", NOT_CONVERGED),
                                             ("summary:best_test_acc", FAILS)])
def test_a_quantity_that_keeps_its_best_cannot_fall(tmp_path, metric, verdict):
    """B − A ≥ 20 fails; A's curve falls at the end. Its final accuracy would fall with it (toward passing);
    its best accuracy stays."""
    write_run(tmp_path, "a0", "a", jittered([0.60] * 5 + [0.58, 0.56, 0.54, 0.52, 0.50]))
    write_run(tmp_path, "b0", "b", [0.65] * 10)
    (tmp_path / RUNS / "a0" / "summary.json").write_text(json.dumps(
        {"status": "completed", "final_test_acc": 0.50, "best_test_acc": 0.60}))
    claim = Claim("fbn/toy", "", {}, "", "p", {"A": q("a", metric), "B": q("b")}, (Check("B", "A", "at_least", 20.0, ""),))
    assert judge(claim, tmp_path).verdict == verdict


def test_a_falling_loss_and_a_ratio_and_a_diverged_run(tmp_path):
    """A's loss over B's at most 0.5: A's falling loss moves the ratio toward passing; a diverged run has no
    trend (its curve is not read), and A's mean, which counts it at the value it ended with, moves by the completed
    run's line times its share of A's runs (half)."""
    claim = Claim("fedbn/toy", "A's loss is lower.", {}, "", "p",
                  {"A": q("a", "final:train_loss", 1.0), "B": q("b", "final:train_loss", 1.0)},
                  (Check("A", "B", "ratio_at_most", 0.5, "toy"),))
    write_run(tmp_path, "a0", "a", jittered([2.0] * 5 + [1.9, 1.8, 1.7, 1.6, 1.5]), "train_loss")
    write_run(tmp_path, "b0", "b", [1.0] * 10, "train_loss")
    result = judge(claim, tmp_path)
    assert result.verdict == NOT_CONVERGED and result.drifts[0].change == pytest.approx(0.4, abs=0.01)
    write_run(tmp_path, "a1", "a", [2.0, 2.5, 3.0, 3.5, 4.0, 4.5], "train_loss", status="diverged")
    result = judge(claim, tmp_path)
    assert result.verdict == NOT_CONVERGED and result.measured["A"].trend.runs == 1
    assert result.measured["A"].trend.change == pytest.approx(-0.2, abs=0.01)
    assert curve_column("summary:robust_acc_at_best_val") == "val_robust_acc" and curve_column("first:x") is None
    assert curve_column("rises:train_loss") is None and curve_column("reach:train_loss<=0.1") is None


def test_a_claim_whose_control_passes_too_is_uninformative(tmp_path):
    claim = Claim("fbn/toy", "Defended ≈ no attack.", {}, "", "p", {"defended": q("d"), "clean": q("c")},
                  (Check("defended", "clean", "within", 3.0, "toy"),),
                  controls=(Control("undefended", {"defended": q("u")}),))
    write_run(tmp_path, "d0", "d", [0.86] * 10)
    write_run(tmp_path, "c0", "c", [0.87] * 10)
    assert judge(claim, tmp_path).verdict == UNCONTROLLED            # the control's runs are missing
    write_run(tmp_path, "u0", "u", [0.50] * 10)
    result = judge(claim, tmp_path)
    assert result.verdict == HOLDS and result.controls == [False]    # undefended fails the check: informative
    (tmp_path / RUNS / "u0" / "summary.json").write_text(json.dumps({"status": "completed", "final_test_acc": 0.85}))
    result = judge(claim, tmp_path)
    assert result.verdict == UNINFORMATIVE and result.controls == [True]
    assert result.control_measured[0]["defended"].values == pytest.approx([85.0])
    md = claims_md([result])
    assert "undefended (defended → 85.0 (n=1)): **passes too**" in md and "➖ uninformative" in md


def test_a_control_reads_only_its_checks(tmp_path):
    checks = (Check("A", "B", "within", 3.0, "toy"), Check("A", "C", "at_least", 7.0, "toy"))
    quantities = {"A": q("a"), "B": q("b"), "C": q("c")}
    write_run(tmp_path, "a0", "a", [0.80] * 10)
    write_run(tmp_path, "b0", "b", [0.80] * 10)
    write_run(tmp_path, "c0", "c", [0.50] * 10)
    write_run(tmp_path, "x0", "x", [0.79] * 10)                      # passes check 0 (1 apart from B)
    write_run(tmp_path, "y0", "y", [0.52] * 10)                      # fails check 0 (28 apart), passes check 1
    only_first = Claim("fixbn/toy", "", {}, "", "p", quantities, checks,
                       controls=(Control("x", {"A": q("x")}, checks=(0,)),))
    assert judge(only_first, tmp_path).verdict == UNINFORMATIVE
    both = Claim("fixbn/toy", "", {}, "", "p", quantities, checks, controls=(Control("y", {"A": q("y")}),))
    assert judge(both, tmp_path).verdict == HOLDS
    with pytest.raises(ValueError, match="replaces no quantity or unknown"):
        Claim("fixbn/toy", "", {}, "", "p", quantities, checks, controls=(Control("z", {"Z": q("z")}),))
    with pytest.raises(ValueError, match="reads no check"):
        Claim("fixbn/toy", "", {}, "", "p", quantities, checks, controls=(Control("z", {"A": q("z")}, checks=(5,)),))


def test_a_superseded_declaration_is_judged_and_shown_with_why(tmp_path):
    old = gap_claim(threshold=5.0)
    new = Claim("fbn/toy", "A beats B on the right quantity.", {}, "hand-made", "p",
                {"A": q("a", "final:eval_loss", 1.0), "B": q("b", "final:eval_loss", 1.0)},
                (Check("A", "B", "at_most", 0.0, "toy"),), superseded=(Superseded(old, "it measured the wrong loss"),))
    write_run(tmp_path, "a0", "a", [0.50] + [0.90] * 9)
    write_run(tmp_path, "b0", "b", FLAT_B + [0.50] * 5)
    result = judge(new, tmp_path)
    assert result.verdict == NOT_RUN and [v.verdict for v in result.superseded] == [HOLDS]   # no eval_loss yet
    md = claims_md([result])
    assert "**Superseded declaration** (verdict on the committed runs: ✅ holds). Replaced because: it measured the " \
           "wrong loss" in md and md.count("### fbn/toy") == 1 and "> A beats B." in md


def test_the_rule_is_stated_once_and_a_not_converged_claim_says_what_decides_it(tmp_path):
    write_run(tmp_path, "a0", "a", [0.50] * 5 + [0.55, 0.60, 0.62, 0.63, 0.65])
    write_run(tmp_path, "b0", "b", [0.50] * 10)
    md = claims_md([judge(gap_claim(decided_by="300 rounds"), tmp_path),
                    judge(gap_claim(full_scale="`experiment=x`"), tmp_path)])
    assert md.count(RULE) == 1
    assert "**Not converged** ([rule](#how-to-read-a-verdict)): `A − B ≥ 20` still drifting toward passing" in md
    assert "Decided by: 300 rounds." in md and "Decided by: `experiment=x`." in md
    assert "+9.20 ± 1.65 across 5 evaluations (to round 100)" in md


def test_a_claim_the_stand_ins_cannot_test_reads_cannot_decide_offline(tmp_path):
    """Whatever its runs give (none, a hold), with its checks still measured and the data that would decide it."""
    claim = gap_claim(offline="the stand-in's domains all derive from MNIST; decided by real SVHN")
    assert judge(claim, tmp_path).verdict == OFFLINE
    write_run(tmp_path, "a0", "a", [0.90] * 10)
    write_run(tmp_path, "b0", "b", [0.50] * 10)
    result = judge(claim, tmp_path)
    assert result.verdict == OFFLINE and result.check_results == [True]
    assert judge(gap_claim(), tmp_path).verdict == HOLDS
    md = claims_md([result])
    assert "**Verdict: ⛔ cannot decide offline**" in md
    assert "**Cannot decide offline** ([why](#how-to-read-a-verdict)): the stand-in's domains all derive from MNIST; " \
           "decided by real SVHN." in md


# -- issue 57 §2: verdicts that say when they cannot tell ---------------------------------------------------------

def test_a_quantity_with_too_few_evaluations_for_a_trend_makes_its_claim_say_so(tmp_path):
    """Six evaluations leave a window of three (the half cap): no trend can be read, so neither the fail nor the
    hold is silent (today's rule read a trend on three points, or dropped a quantity without one)."""
    write_run(tmp_path, "a0", "a", [0.50, 0.55, 0.58, 0.59, 0.60, 0.60])
    write_run(tmp_path, "b0", "b", [0.50] * 6)
    failing = judge(gap_claim(threshold=20.0), tmp_path)
    assert failing.verdict == FAILS_UNTOLD and failing.measured["A"].untold
    holding = judge(gap_claim(threshold=5.0), tmp_path)
    assert holding.verdict == HOLDS_UNTOLD
    md = claims_md([failing])
    assert "too few evaluations to tell" in md and "at least 10 evaluations" in md


def test_one_evaluation_has_no_trend_either(tmp_path):
    write_run(tmp_path, "a0", "a", [0.90])
    write_run(tmp_path, "b0", "b", [0.50])
    assert judge(gap_claim(threshold=20.0), tmp_path).verdict == HOLDS_UNTOLD


def test_a_zero_standard_error_reads_as_cannot_tell_not_as_significant(tmp_path):
    """A perfectly straight rising line has no scatter: its drift cannot be weighed against noise."""
    write_run(tmp_path, "a0", "a", [0.50 + 0.01 * i for i in range(10)])
    write_run(tmp_path, "b0", "b", [0.50] * 10)
    result = judge(gap_claim(threshold=20.0), tmp_path)
    assert result.verdict == FAILS_UNTOLD and "scatter" in result.measured["A"].untold


def test_a_flat_curve_without_scatter_is_converged(tmp_path):
    write_run(tmp_path, "a0", "a", [0.60] * 10)
    write_run(tmp_path, "b0", "b", [0.50] * 10)
    assert judge(gap_claim(threshold=20.0), tmp_path).verdict == FAILS


def test_a_best_keeping_quantity_drifts_by_what_its_best_would_gain(tmp_path):
    """A's best (0.80, at round 40) stands far above a curve climbing back at its end (0.60 → 0.68): the line would
    not reach the best in another window, so the best gains nothing and B − A ≥ 20 has no drift toward failing... and
    A ≥ B + 30 (failing) no drift toward passing. Today's rule reads the raw slope: significant."""
    noise = [0.002, -0.003, 0.001, 0.0, -0.002, 0.003, -0.001, 0.002, -0.002, 0.001]
    curve = [0.50, 0.60, 0.70, 0.80, 0.60, 0.60, 0.62, 0.64, 0.66, 0.68]
    write_run(tmp_path, "a0", "a", [round(c + n, 4) for c, n in zip(curve, noise)])
    write_run(tmp_path, "b0", "b", [round(0.50 + n, 4) for n in noise[::-1]])
    (tmp_path / RUNS / "a0" / "summary.json").write_text(json.dumps(
        {"status": "completed", "final_test_acc": 0.681, "best_test_acc": 0.80}))
    claim = Claim("fbn/toy", "", {}, "", "p", {"A": q("a", "summary:best_test_acc"), "B": q("b")},
                  (Check("A", "B", "at_least", 35.0, ""),))
    result = judge(claim, tmp_path)
    assert result.verdict == FAILS and not (result.drifts[0] and result.drifts[0].significant)


def test_a_best_at_its_last_evaluation_still_rises_with_its_line(tmp_path):
    noise = [0.002, -0.003, 0.001, 0.0, -0.002, 0.003, -0.001, 0.002, -0.002, 0.001]
    curve = [0.50 + 0.02 * i + n for i, n in enumerate(noise)]
    write_run(tmp_path, "a0", "a", [round(c, 4) for c in curve])
    write_run(tmp_path, "b0", "b", [round(0.50 + n, 4) for n in noise[::-1]])
    (tmp_path / RUNS / "a0" / "summary.json").write_text(json.dumps(
        {"status": "completed", "final_test_acc": curve[-1], "best_test_acc": max(curve)}))
    claim = Claim("fbn/toy", "", {}, "", "p", {"A": q("a", "summary:best_test_acc"), "B": q("b")},
                  (Check("A", "B", "at_least", 35.0, ""),))
    assert judge(claim, tmp_path).verdict == NOT_CONVERGED


def test_a_hold_inside_its_seeds_noise_says_so(tmp_path):
    """A − B ≥ 1.6 holds by 0.10 on seeds +2.14 / −0.13 / +3.10 (fedrbn/fig6_lambda_20's gaps): its standard error
    (0.98) is larger than its margin."""
    flat = [0.0] * 10
    for s, gap in enumerate((2.14, -0.13, 3.10)):
        write_run(tmp_path, f"a{s}", "a", [round(0.5 + gap / 100 + f, 6) for f in flat])
        write_run(tmp_path, f"b{s}", "b", [0.5] * 10)
    close = judge(gap_claim(threshold=1.6, seeds=3), tmp_path)
    assert close.check_results == [True] and close.verdict == HOLDS_IN_NOISE
    assert judge(gap_claim(threshold=0.0, seeds=3), tmp_path).verdict == HOLDS


def test_a_fail_inside_its_seeds_noise_says_so_and_a_clear_fail_does_not(tmp_path):
    """The same seeds against A − B ≥ 1.8 fail by 0.10, inside the standard error (0.98): *fails (within seed
    noise)*; against ≥ 5 they fail by 3.30, outside it: *fails*."""
    flat = [0.0] * 10
    for s, gap in enumerate((2.14, -0.13, 3.10)):
        write_run(tmp_path, f"a{s}", "a", [round(0.5 + gap / 100 + f, 6) for f in flat])
        write_run(tmp_path, f"b{s}", "b", [0.5] * 10)
    close = judge(gap_claim(threshold=1.8, seeds=3), tmp_path)
    assert close.check_results == [False] and close.in_noise == [0] and close.verdict == FAILS_IN_NOISE
    assert judge(gap_claim(threshold=5.0, seeds=3), tmp_path).verdict == FAILS


@pytest.mark.parametrize("runs, size", [(1, 5), (3, 5), (1, 11), (3, 120)])
def test_the_stated_power_is_what_the_rule_detects_on_synthetic_lines(runs, size):
    """A linear rise of ``detectable(runs, size)`` σ across the window, Gaussian noise σ: the rule's own
    ``line_trend`` reads it significant 80 % of the time (± 3 points over 2000 seeded trials); a flat line 2.5 %."""
    rng = np.random.default_rng(runs * 100 + size)
    count = 5 * size                               # a curve whose window (its last fifth) is ``size`` evaluations
    rounds = list(range(1, count + 1))
    assert window_size(count) == size
    ramp = np.clip(np.arange(count) - (count - size), 0, None) / (size - 1)

    def detected(change: float) -> float:
        hits = 0
        for _ in range(2000):
            curves = (change * ramp + rng.standard_normal((runs, count))).tolist()
            t = line_trend(rounds, curves)
            hits += t.change > stats.t.ppf(0.975, t.df) * t.se
        return hits / 2000

    assert detected(detectable(runs, size)) == pytest.approx(0.80, abs=0.03)
    assert detected(0.0) == pytest.approx(0.025, abs=0.012)


def test_a_claim_at_a_fixed_budget_is_read_without_trends(tmp_path):
    """A parity of two codes run for the same two rounds has no trend and needs none: it holds or fails on its
    check alone (issue 57 §2), where the same claim under the convergence rule cannot tell."""
    write_run(tmp_path, "a0", "a", [0.50, 0.90])
    write_run(tmp_path, "b0", "b", [0.50, 0.55])
    parity = "the same 2 rounds on both sides"
    assert judge(gap_claim(threshold=20.0), tmp_path).verdict == HOLDS_UNTOLD
    assert judge(gap_claim(threshold=20.0, fixed_budget=parity), tmp_path).verdict == HOLDS
    assert judge(gap_claim(threshold=40.0), tmp_path).verdict == FAILS_UNTOLD
    assert judge(gap_claim(threshold=40.0, fixed_budget=parity), tmp_path).verdict == FAILS
    md = claims_md([judge(gap_claim(fixed_budget=parity), tmp_path)])
    assert "**Fixed budget** ([rule](#how-to-read-a-verdict)): the same 2 rounds on both sides." in md
