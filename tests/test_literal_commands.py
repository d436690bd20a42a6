"""The command the project is built around, literally, for every norm method:
``python run.py norm=<n> partition=dirichlet alpha=0.1`` (default settings, fewer rounds) must
complete far above chance, never diverge; and every run ends with one summary line."""
from __future__ import annotations

import pytest

from conftest import CONF, compose_config
from fedbn_bench.records.run_records import summary_line
from fedbn_bench.runner import run_experiment

NORMS = sorted(p.stem for p in (CONF / "norm").glob("*.yaml"))
ROUNDS = 8  # FBN under the old default optimizer diverged in round 3


@pytest.mark.parametrize("norm", NORMS)
def test_dirichlet_0_1_completes_far_above_chance_for_every_norm(tmp_path, norm):
    cfg = compose_config([f"norm={norm}", "partition=dirichlet", "alpha=0.1", f"rounds={ROUNDS}", f"eval_every={ROUNDS}"])
    summary = run_experiment(cfg, tmp_path)
    assert summary["status"] == "completed", summary
    assert summary["final_test_acc"] > 0.4, summary  # chance is 0.10


def test_summary_line_names_status_accuracies_rounds_and_run_dir():
    line = summary_line({"status": "completed", "final_test_acc": 0.9512, "best_test_acc": 0.96,
                         "rounds_completed": 30}, "outputs/x")
    assert line == "completed: final acc 95.12%, best 96.00%, rounds 30, run dir outputs/x"


def test_a_diverged_run_says_at_which_round_and_what_to_try():
    line = summary_line({"status": "diverged", "final_test_acc": 0.1, "best_test_acc": 0.1,
                         "rounds_completed": 3}, "outputs/y")
    first, advice = line.splitlines()
    assert first.startswith("diverged: ") and "rounds 3" in first and "outputs/y" in first
    assert "round 3" in advice and "lr" in advice and "algo.clip_grad_norm" in advice
