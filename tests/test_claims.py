"""The claims layer (``figures/claims``): verdicts come from run records only. Hand-made run directories
(as ``run.py -m`` writes them) flip a verdict; a claim whose runs are missing, too few or not
completed reads "not run", never "holds"; every declared claim points at a preset whose sweep writes
the runs it reads; the committed ``results/CLAIMS.md`` and the README's table are what the committed
runs give."""
from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from conftest import CONF, write_run_record
from fedbn_bench.figures.base import measure
from fedbn_bench.figures.claims import CLAIMS
from fedbn_bench.figures.claims.base import (FAILS, FAILS_IN_NOISE, HOLDS, HOLDS_UNTOLD, NOT_RUN, Check, Claim, Measured,
                                             Quantity, judge)
from fedbn_bench.figures.claims.cli import main
from fedbn_bench.figures.claims.report import BEGIN, END, anchor, claims_md, ours, readme_table, replace_block
from fedbn_bench.records.reader import read_run

ROOT = CONF.parent
RUNS = "results/toy_claim/runs"


def write_run(root: Path, name: str, method: str, gamma: float, acc: float, status: str = "completed") -> Path:
    return write_run_record(root / RUNS / name, [f"+experiment/m={method}", f"gamma={gamma}"], acc, [acc] * 10,
                            status=status, config={"gamma": gamma, "norm": {"name": "x"}})


def toy_claim(seeds: int = 2) -> Claim:
    def q(method: str) -> Quantity:
        return Quantity(RUNS, {"+experiment/m": method, "gamma": 0})
    return Claim("fbn/toy", "A beats B by 20 points.", {"A": 80.0, "B": 17.0}, "hand-made", "fbn/fig3a_fmnist",
                 {"A": q("a"), "B": q("b")}, (Check("A", "B", "at_least", 20.0, "a third of 63"),), seeds=seeds)


def test_verdict_flips_with_the_run_records(tmp_path):
    claim = toy_claim()
    assert judge(claim, tmp_path).verdict == NOT_RUN                       # no runs at all
    write_run(tmp_path, "a0", "a", 0, 0.85)
    write_run(tmp_path, "b0", "b", 0.0, 0.50)
    write_run(tmp_path, "b1", "b", 0, 0.52)
    assert judge(claim, tmp_path).verdict == NOT_RUN                       # A has 1 of 2 seeds
    write_run(tmp_path, "a1", "a", 0, 0.87)
    verdict = judge(claim, tmp_path)
    assert verdict.verdict == HOLDS and verdict.check_results == [True]
    assert verdict.measured["A"].values == pytest.approx([85.0, 87.0])     # 0 and 0.0 match gamma 0
    write_run(tmp_path, "b2", "b", 0, 0.99)                                 # B: 67.0, A − B = 19 < 20
    assert judge(claim, tmp_path).verdict == FAILS_IN_NOISE                 # by 1, B's seeds spread 50-99
    for name in ("b3", "b4", "b5"):
        write_run(tmp_path, name, "b", 0, 0.99)                             # B: 83.0, A − B = 3, 17 short
    assert judge(claim, tmp_path).verdict == FAILS                          # of 20, standard error 10.2
    write_run(tmp_path, "a_other_gamma", "a", 1, 0.10)                      # another gamma: not A
    assert len(judge(claim, tmp_path).measured["A"].values) == 2


def test_failed_or_unfinished_runs_never_count_and_diverged_runs_do(tmp_path):
    claim = toy_claim(seeds=1)
    write_run(tmp_path, "a0", "a", 0, 0.95, status="failed")
    write_run(tmp_path, "b0", "b", 0, 0.10)
    verdict = judge(claim, tmp_path)
    assert verdict.verdict == NOT_RUN and verdict.measured["A"].other == ["a0: failed"]
    (tmp_path / RUNS / "a0" / "summary.json").unlink()                     # killed before its summary
    assert judge(claim, tmp_path).measured["A"].other == ["a0: no summary"]
    write_run(tmp_path, "a1", "a", 0, 0.10, status="diverged")            # ended at chance: a measured outcome
    verdict = judge(claim, tmp_path)
    assert verdict.verdict == FAILS and verdict.measured["A"].values == pytest.approx([10.0])
    assert verdict.measured["A"].other == ["a0: no summary", "a1: diverged (counted)"]


def test_first_and_final_skip_cells_without_a_value(tmp_path):
    run = write_run(tmp_path, "a0", "a", 0, 0.5)
    (run / "metrics.csv").write_text("round,change\n20,nan\n40,250.0\n60,10.0\n")
    claim = Claim("fixbn/toy", "", {}, "", "p", {"last": Quantity(RUNS, {}, "final:change", 1.0),
                                                 "first": Quantity(RUNS, {}, "first:change", 1.0)},
                  (Check("last", "first", "ratio_at_most", 0.5, ""),))
    verdict = judge(claim, tmp_path)
    assert verdict.measured["first"].values == [250.0] and verdict.check_results == [True]
    assert verdict.verdict == HOLDS_UNTOLD and "2 evaluations in common" in verdict.measured["last"].untold


def test_mean_and_rises_of_a_curve(tmp_path):
    """``mean:`` averages a column over the evaluations, ``rises:`` sums its increases (FedBN Fig. 3's "smoother")."""
    run = write_run(tmp_path, "a0", "a", 0, 0.5)
    (run / "metrics.csv").write_text("round,loss\n1,2.0\n2,nan\n3,1.0\n4,1.5\n5,0.5\n6,0.75\n")
    claim = Claim("fedbn/toy", "", {}, "", "p", {"mean": Quantity(RUNS, {}, "mean:loss", 1.0),
                                                 "rises": Quantity(RUNS, {}, "rises:loss", 1.0)},
                  (Check("rises", "mean", "at_most", 0.0, ""),))
    verdict = judge(claim, tmp_path)
    assert verdict.measured["mean"].values == pytest.approx([1.15])
    assert verdict.measured["rises"].values == pytest.approx([0.75])   # 1.0 -> 1.5 and 0.5 -> 0.75


def test_reach_is_the_first_round_at_or_below_a_level(tmp_path):
    """``reach:<column><=<level>`` is the round where the column first gets to the level (FedBN Fig. 9's steps to a
    training loss); a run that never gets there has no value and does not count."""
    run = write_run(tmp_path, "a0", "a", 0, 0.5)
    (run / "metrics.csv").write_text("round,loss\n1,2.0\n2,nan\n3,0.1\n4,0.05\n5,0.2\n")
    never = write_run(tmp_path, "b0", "b", 0, 0.5)
    (never / "metrics.csv").write_text("round,loss\n1,2.0\n2,0.5\n")
    quantities = {m: Quantity(RUNS, {"+experiment/m": m}, "reach:loss<=0.1", 1.0) for m in ("a", "b")}
    verdict = judge(Claim("fedbn/toy", "", {}, "", "p", quantities, (Check("a", "b", "ratio_at_most", 0.9, ""),)),
                    tmp_path)
    assert verdict.measured["a"].values == [3.0] and verdict.measured["a"].trend is None
    assert verdict.measured["b"].values == [] and verdict.verdict == NOT_RUN
    with pytest.raises(ValueError, match="reach:<column><=<level>"):
        measure(read_run(run), "reach:loss")


@pytest.mark.parametrize("relation, a, b, passes", [
    ("at_least", 30.0, 10.0, True), ("at_least", 29.0, 10.0, False),
    ("at_most", 12.0, 10.0, True), ("at_most", 12.5, 10.0, False),
    ("within", 7.0, 10.0, True), ("within", 13.5, 10.0, False),
    ("ratio_at_most", 4.0, 10.0, True), ("ratio_at_most", 6.0, 10.0, False),
])
def test_relations(relation, a, b, passes):
    threshold = {"at_least": 20.0, "at_most": 2.0, "within": 3.0, "ratio_at_most": 0.5}[relation]
    assert Check("a", "b", relation, threshold, "").passes(a, b) is passes


def test_a_check_against_a_number_and_unknown_names():
    check = Check("naive", 10.0, "at_most", 10.0, "chance")
    assert check.text() == "naive − 10 ≤ 10"
    with pytest.raises(ValueError, match="unknown quantities"):
        Claim("fbn/x", "", {}, "", "p", {"A": Quantity(RUNS, {})}, (Check("A", "C", "within", 1.0, ""),))
    with pytest.raises(ValueError, match="relation"):
        Check("a", "b", "about", 1.0, "")


def sweep_of(preset: str):
    cfg = OmegaConf.load(CONF / "experiment" / f"{preset}.yaml")
    return OmegaConf.select(cfg, "hydra.sweep.dir"), OmegaConf.select(cfg, "hydra.sweeper.params") or {}


def test_every_claim_reads_runs_a_declared_preset_writes():
    """Each quantity's run tree is the sweep dir of the claim's preset or of another claim's (or a superseded
    declaration's) preset (or, for the authors' code, a tree whose command ``scripts/parity/README.md`` gives), and
    each ``+override`` it selects on is one of that preset's sweep parameters (so the runs can be found)."""
    declared = [*CLAIMS, *(s.claim for c in CLAIMS for s in c.superseded)]
    sweeps = {sweep_of(c.preset)[0]: sweep_of(c.preset)[1] for c in declared}
    parity = (ROOT / "scripts" / "parity" / "README.md").read_text()
    sweeps.update({q.runs: {} for c in CLAIMS for q in c.quantities.values() if f"--record {q.runs}/" in parity})
    assert len({c.id for c in CLAIMS}) == len(CLAIMS)
    for claim in CLAIMS:
        assert (CONF / "experiment" / f"{claim.preset}.yaml").exists(), claim.id
        assert set(claim.paper_numbers) <= set(claim.quantities), claim.id
        controls = [(f"control {c.text}", q) for c in claim.controls for q in c.replace.values()]
        for name, q in [*claim.quantities.items(), *controls]:
            assert q.runs in sweeps, (claim.id, name, q.runs)
            for key in q.where:
                if key.startswith("+"):
                    assert key in sweeps[q.runs], (claim.id, name, key)


def test_committed_claims_and_readme_table_are_up_to_date():
    assert main(["--check", "--root", str(ROOT)]) == 0


def test_readme_block_is_replaced_and_markers_are_required(tmp_path):
    claim = toy_claim()
    verdicts = [judge(claim, tmp_path)]
    text = f"intro\n{BEGIN}\nold\n{END}\noutro\n"
    new = replace_block(text, readme_table(verdicts))
    assert new.startswith("intro\n") and new.endswith("\noutro\n") and "old" not in new
    assert "[toy](../results/CLAIMS.md#fbntoy)" in new and "not run" in new
    with pytest.raises(ValueError, match="markers"):
        replace_block("no markers", readme_table(verdicts))
    assert f"### {claim.id}" in claims_md(verdicts) and anchor("fbn/fig3a_x-y") == "fbnfig3a_x-y"


def test_ours_shows_a_loss_below_one_to_three_decimals_and_accuracies_to_one():
    assert ours(Measured([88.0, 90.0])) == "89.0 ± 1.4 (n=2)"
    assert ours(Measured([0.9, 0.91])) == "0.905 ± 0.007 (n=2)"
    assert ours(Measured()) == "–"
