"""Replays of committed runs (issue 57 §1): the comparison (``records/replay.py``), the re-run of a run's own config
(``replay_runner.py``) on two committed runs, one trained by the loop backend and one by packed, and what the claims
page makes of the results (``figures/claims/evidence.py``)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from conftest import CONF, write_run_record
from fedbn_bench.figures.claims.base import Check, Claim, Quantity, Superseded, judge
from fedbn_bench.figures.claims.evidence import (MADE_AT, NOT_REPLAYED, ClaimEvidence, evidence_of, evidence_summary,
                                               run_evidence)
from fedbn_bench.figures.claims.report import claims_md
from fedbn_bench.records.machine import cpu_model
from fedbn_bench.records.replay import (DRIFTED, NOT_COMPARABLE, REPRODUCED, Replay, compare, load_replays,
                                        record_path, write_replay)
from fedbn_bench.replay_runner import replay

ROOT = CONF.parent
LOOP_RUN = Path("results/fedbn/fig9_steps_to_loss/runs/fedbn-seed4")
PACKED_RUN = Path("results/anchors/digits8x8_default")

ROWS = [{"round": "5", "test_acc": "0.9", "test_loss": "0.3", "wall_s": "1.5"},
        {"round": "10", "test_acc": "0.95", "test_loss": "0.2", "wall_s": "3.1"}]


def test_equal_rows_reproduce_and_timing_is_not_compared():
    again = [{**row, "wall_s": "9.9"} for row in ROWS]
    assert compare(ROWS, again, 2) == (REPRODUCED, "equal at rounds 5, 10", None)


def test_the_first_differing_evaluation_names_test_acc_and_by_how_much():
    moved = [ROWS[0], {**ROWS[1], "test_acc": "0.97", "test_loss": "0.5"}]
    status, detail, first = compare(ROWS, moved, 2)
    assert (status, first) == (DRIFTED, 10) and detail == "round 10: test_acc 0.95 committed, 0.97 now (+0.02)"
    assert compare(ROWS, moved, 1)[0] == REPRODUCED            # only the first evaluation is compared


def test_a_replay_that_stops_early_or_another_partition_drifts_and_no_rows_is_not_comparable():
    assert compare(ROWS, ROWS[:1], 2)[1] == "round 10: round 10 committed, none now"
    assert compare(ROWS, ROWS, 2, same_partition=False)[0] == DRIFTED
    assert compare([], ROWS, 1)[0] == NOT_COMPARABLE


def test_replay_results_round_trip_under_results_replay(tmp_path):
    result = Replay("results/a/runs/x", REPRODUCED, "equal at round 5", 1, "abc", setting={"threads": 1})
    path = write_replay(tmp_path, result)
    assert path == tmp_path / "results/replay/a/runs/x.json" == record_path(tmp_path, result.run)
    assert load_replays(tmp_path) == {result.run: result} == load_replays(tmp_path, [result.run, "results/none"])


def test_a_claim_reading_a_drifted_run_reads_evidence_stale():
    drifted = Replay("r1", DRIFTED, "round 5: test_acc 0.3 committed, 0.4 now (+0.1)", 1, "c" * 40)
    same = Replay("r2", REPRODUCED, "equal at round 5", 1, "c" * 40)
    old = Replay("r3", DRIFTED, "round 5: …", 1, "c" * 40)            # a replay of the record r3 replaced
    runs = (run_evidence("r1", drifted, None), run_evidence("r2", same, None), run_evidence("r3", old, "d" * 40),
            run_evidence("r4", None, None))
    assert [r.status for r in runs] == [DRIFTED, REPRODUCED, MADE_AT, NOT_REPLAYED]
    evidence = ClaimEvidence(runs)
    assert evidence.stale and evidence.text() == ("4 runs: 1 reproduced at ccccccc, 1 made at ddddddd, 1 drifted at "
                                                  "ccccccc, 1 not replayed — **evidence stale**")
    assert not ClaimEvidence(runs[1:]).stale


def recorded_here(run: Path) -> bool:
    summary = json.loads((ROOT / run / "summary.json").read_text())
    return summary.get("torch", torch.__version__) == torch.__version__ and summary.get("cpu", cpu_model()) == cpu_model()


@pytest.mark.parametrize("run, backend", [(LOOP_RUN, "loop"), (PACKED_RUN, "packed")])
def test_a_committed_run_replays_equal_at_its_first_evaluation(run, backend):
    """The CI replay: the run's own config, at its recorded thread count and backend, gives its committed first row."""
    result = replay(run, 1, ROOT)
    assert result.setting["engine"] == backend and result.setting["threads"] == 1
    declared = json.loads((ROOT / "results/claims/declared.json").read_text())["runs"]
    assert result.run_commit == (declared[run.as_posix()][0] if run.as_posix() in declared else None)
    if result.status != REPRODUCED and not recorded_here(run):
        pytest.skip(f"recorded with another torch or CPU: {result.detail}")
    assert result.status == REPRODUCED, result.detail


def test_a_changed_committed_value_reads_drifted_at_its_round(tmp_path):
    """The same replay against a copy of the run whose first test accuracy was edited: the check can fail."""
    copy = tmp_path / LOOP_RUN
    shutil.copytree(ROOT / LOOP_RUN, copy)
    lines = (copy / "metrics.csv").read_text().splitlines()
    header, first = lines[0].split(","), lines[1].split(",")
    first[header.index("test_acc")] = "0.123"
    (copy / "metrics.csv").write_text("\n".join([lines[0], ",".join(first), *lines[2:]]) + "\n")
    result = replay(LOOP_RUN, 1, tmp_path)
    assert result.status == DRIFTED and result.first_round == int(first[0]) and "test_acc 0.123 committed" in result.detail


def toy_run(root: Path, runs: str, name: str, method: str, acc: float) -> None:
    write_run_record(root / runs / name, [f"+experiment/m={method}"], acc, [acc] * 10)


def toy_claim(runs: str, superseded: tuple[Superseded, ...] = ()) -> Claim:
    return Claim("fbn/toy", "A beats B by 20 points.", {}, "hand-made", "fbn/fig3a_fmnist",
                 {m.upper(): Quantity(runs, {"+experiment/m": m}) for m in "ab"},
                 (Check("A", "B", "at_least", 20.0, "toy"),), superseded=superseded)


def test_a_superseded_declaration_shows_its_own_runs_evidence_and_the_page_counts_only_current_runs(tmp_path):
    """Its section reads *evidence stale* where its runs drifted; the page's evidence line counts the current
    declaration's runs alone, so a superseded run never makes a current claim stale."""
    new_runs, old_runs = "results/toy/runs", "results/toy_old/runs"
    claim = toy_claim(new_runs, (Superseded(toy_claim(old_runs), "it read the toy's old runs"),))
    for runs in (new_runs, old_runs):
        for name, method, acc in (("a0", "a", 0.85), ("a1", "a", 0.87), ("b0", "b", 0.5), ("b1", "b", 0.52)):
            toy_run(tmp_path, runs, name, method, acc)
    write_replay(tmp_path, Replay(f"{old_runs}/a0", DRIFTED, "round 10: test_acc 0.85 committed, 0.9 now", 1, "c" * 40))
    verdicts = [judge(claim, tmp_path)]
    evidence = evidence_of(verdicts, tmp_path)[claim.id]
    assert not evidence.stale and [e.stale for e in evidence.superseded] == [True]
    assert evidence_summary([evidence]) == ("Of the 4 runs the current claims read: 0 reproduced, 0 made at, "
                                            "0 drifted, 0 not comparable, 4 not replayed.")
    current, superseded = claims_md(verdicts, evidence={claim.id: evidence}).split("**Superseded declaration**")
    assert "- Evidence ([replays](#how-to-read-a-verdict)): 4 runs: 4 not replayed." in current
    assert ("- Evidence: 4 runs: 1 drifted at ccccccc, 3 not replayed — **evidence stale**; superseded, so its "
            "drifted runs are not re-run.") in superseded
    assert "evidence stale" not in current.split("### fbn/toy")[1]
