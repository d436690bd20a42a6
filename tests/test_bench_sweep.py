"""``scripts/bench.py --sweep``: how a sweep's wall time splits into training and the rest."""
from __future__ import annotations


def jobs(*train_s: float, threads: int = 1) -> list[dict]:
    return [{"wall_time_s": t, "threads": threads} for t in train_s]


def test_sequential_training_is_the_jobs_sum(bench):
    row = bench.sweep_row("sequential", 2, 30.0, jobs(10.0, 12.0, threads=2))
    assert row["mode"] == "sequential" and row["train_s"] == 22.0 and row["outside_s"] == 8.0
    assert row["threads"] == "2,2" and row["jobs"] == 2


def test_parallel_training_is_spread_over_the_workers(bench):
    two = bench.sweep_row("joblib", 2, 20.0, jobs(14.0, 15.0))
    assert two["mode"] == "joblib n_jobs=2" and two["train_s"] == 15.0 and two["outside_s"] == 5.0
    eight = bench.sweep_row("joblib", 2, 70.0, jobs(*[15.0] * 8))
    assert eight["train_s"] == 60.0 and eight["outside_s"] == 10.0
    one_long = bench.sweep_row("joblib", 4, 50.0, jobs(40.0, 1.0, 1.0, 1.0))
    assert one_long["train_s"] == 40.0
