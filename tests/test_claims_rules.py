"""The rules that make a verdict say what it knows (``figures/claims/base.py``, ``convergence.py``): a fail on
runs still improving reads *fails (not converged)*, a claim whose control passes too reads *uninformative*
(*holds (control not run)* while the control's runs are missing), and a superseded declaration is judged
and shown beside the claim that replaced it. Hand-made run directories, as ``run.py -m`` writes them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fedbn_bench.figures.claims.base import (
    FAILS, HOLDS, NOT_CONVERGED, NOT_RUN, UNCONTROLLED, UNINFORMATIVE, Check, Claim, Control, Quantity, Superseded, judge)
from fedbn_bench.figures.claims.convergence import RULE, curve_column
from fedbn_bench.figures.claims.report import claims_md

RUNS = "results/toy_rules/runs"


def write_run(root: Path, name: str, method: str, curve: list[float], column: str = "test_acc",
              status: str = "completed") -> None:
    """A run whose ``column`` takes the values ``curve`` at rounds 10, 20, ...; its summary ends the curve."""
    run = root / RUNS / name
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"seed": 0}))
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"+experiment/m={method}"]))
    (run / "summary.json").write_text(json.dumps({"status": status, "final_test_acc": curve[-1]}))
    (run / "metrics.csv").write_text(f"round,{column}\n" + "".join(f"{10 * (i + 1)},{v}\n" for i, v in enumerate(curve)))


def q(method: str, metric: str = "summary:final_test_acc", scale: float = 100.0) -> Quantity:
    return Quantity(RUNS, {"+experiment/m": method}, metric, scale)


def gap_claim(threshold: float = 20.0, **kwargs) -> Claim:
    return Claim("fbn/toy", "A beats B.", {}, "hand-made", "p", {"A": q("a"), "B": q("b")},
                 (Check("A", "B", "at_least", threshold, "toy"),), **kwargs)


FLAT_B = [0.40, 0.50, 0.50, 0.50, 0.50]


@pytest.mark.parametrize("tail, verdict", [
    ([0.55, 0.60, 0.62, 0.63, 0.65], NOT_CONVERGED),   # last fifth (at least two): 0.63 -> 0.65, +2 points > 0.5
    ([0.55, 0.60, 0.62, 0.65, 0.654], FAILS),          # +0.4 points: within the 0.5-point floor
    ([0.55, 0.60, 0.62, 0.70, 0.66], FAILS),           # falling at the end: converged (or worse), not improving
])
def test_a_fail_on_a_rising_curve_reads_not_converged(tmp_path, tail, verdict):
    write_run(tmp_path, "a0", "a", tail)
    write_run(tmp_path, "b0", "b", FLAT_B)
    result = judge(gap_claim(), tmp_path)
    assert result.verdict == verdict
    assert result.improving == (["A"] if verdict == NOT_CONVERGED else [])


def test_the_window_is_the_last_fifth_and_the_noise_the_standard_error(tmp_path):
    """Ten evaluations: the window is the last two, +10 on the mean curve; two seeds ending at 40 and 65
    (sd 17.7, standard error 12.5) hide it, a third ending at 50 (se 7.3) does not."""
    write_run(tmp_path, "a0", "a", [0.1] * 8 + [0.30, 0.40])
    write_run(tmp_path, "a1", "a", [0.1] * 8 + [0.55, 0.65])
    write_run(tmp_path, "b0", "b", [0.9] * 10)
    result = judge(gap_claim(), tmp_path)
    p = result.measured["A"].progress
    assert p.gain == pytest.approx(10.0) and p.noise == pytest.approx(12.5) and p.last_round == 100
    assert result.verdict == FAILS
    write_run(tmp_path, "a2", "a", [0.1] * 8 + [0.40, 0.50])
    assert judge(gap_claim(), tmp_path).verdict == NOT_CONVERGED


def test_a_falling_loss_is_improving_and_a_diverged_run_has_no_trend(tmp_path):
    claim = Claim("fedbn/toy", "A's loss is lower.", {}, "", "p",
                  {"A": q("a", "mean:train_loss", 1.0), "B": q("b", "mean:train_loss", 1.0)},
                  (Check("A", "B", "at_most", 0.0, "toy"),))
    write_run(tmp_path, "a0", "a", [2.0, 1.9, 1.8, 1.7, 1.6], "train_loss")
    write_run(tmp_path, "b0", "b", [1.0, 1.0, 1.0, 1.0, 1.0], "train_loss")
    assert judge(claim, tmp_path).verdict == NOT_CONVERGED
    write_run(tmp_path, "a1", "a", [2.0, 2.5, 3.0, 3.5, 4.0], "train_loss", status="diverged")
    result = judge(claim, tmp_path)
    assert result.verdict == NOT_CONVERGED and result.measured["A"].progress.gain == pytest.approx(0.1)
    assert curve_column("summary:robust_acc_at_best_val") == "val_robust_acc" and curve_column("first:x") is None


def test_a_claim_whose_control_passes_too_is_uninformative(tmp_path):
    claim = Claim("fbn/toy", "Defended ≈ no attack.", {}, "", "p", {"defended": q("d"), "clean": q("c")},
                  (Check("defended", "clean", "within", 3.0, "toy"),),
                  controls=(Control("undefended", {"defended": q("u")}),))
    write_run(tmp_path, "d0", "d", [0.86])
    write_run(tmp_path, "c0", "c", [0.87])
    assert judge(claim, tmp_path).verdict == UNCONTROLLED            # the control's runs are missing
    write_run(tmp_path, "u0", "u", [0.50])
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
    write_run(tmp_path, "a0", "a", [0.80])
    write_run(tmp_path, "b0", "b", [0.80])
    write_run(tmp_path, "c0", "c", [0.50])
    write_run(tmp_path, "x0", "x", [0.79])                           # passes check 0 (1 apart from B)
    write_run(tmp_path, "y0", "y", [0.52])                           # fails check 0 (28 apart), passes check 1
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
    write_run(tmp_path, "a0", "a", [0.50, 0.90, 0.90, 0.90, 0.90])
    write_run(tmp_path, "b0", "b", FLAT_B)
    result = judge(new, tmp_path)
    assert result.verdict == NOT_RUN and [v.verdict for v in result.superseded] == [HOLDS]   # no eval_loss yet
    md = claims_md([result])
    assert "**Superseded declaration** (verdict on the committed runs: ✅ holds). Replaced because: it measured the " \
           "wrong loss" in md and md.count("### fbn/toy") == 1 and "> A beats B." in md


def test_the_rule_is_stated_once_and_a_not_converged_claim_says_what_decides_it(tmp_path):
    write_run(tmp_path, "a0", "a", [0.55, 0.60, 0.62, 0.63, 0.65])
    write_run(tmp_path, "b0", "b", FLAT_B)
    md = claims_md([judge(gap_claim(decided_by="300 rounds"), tmp_path),
                    judge(gap_claim(full_scale="`experiment=x`"), tmp_path)])
    assert md.count(RULE) == 1
    assert "**Not converged** ([rule](#how-to-read-a-verdict)): A still improving" in md
    assert "Decided by: 300 rounds." in md and "Decided by: `experiment=x`." in md
    assert "+2.00 > 0.50: **improving** (round 50)" in md
