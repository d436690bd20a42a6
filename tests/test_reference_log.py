"""``records/reference_log.py``: a HybridBN log (any of its main scripts) becomes a run record that ``records/reader.py`` reads like
ours (rounds from 1, accuracy as a fraction, the final and best values), and a log that stopped early or
never evaluated is a failed run, which no claim counts."""
from __future__ import annotations

import pytest

from fedbn_bench.records.reader import read_run
from fedbn_bench.records.reference_log import hybridbn_rows, write_hybridbn_record

LOG = """Federated Learning:  fbn
Round   0, selected client [3 1 0]
client loss: [0.239], Average loss 0.239
test: Acc 19.970, Loss 4.291
Round   1, selected client [2 0 1]
test: Acc 61.250, Loss 1.104
Round   2, selected client [0 2 3]
test: Acc 58.500, Loss 1.250
best test: Acc 61.250, Loss 1.104
"""


def test_rows_count_rounds_from_one_in_fractions():
    assert hybridbn_rows(LOG) == [
        {"round": 1, "test_acc": pytest.approx(0.1997), "test_loss": 4.291},
        {"round": 2, "test_acc": pytest.approx(0.6125), "test_loss": 1.104},
        {"round": 3, "test_acc": pytest.approx(0.585), "test_loss": 1.25},
    ]


def test_record_reads_back_as_a_completed_run(tmp_path):
    write_hybridbn_record(tmp_path / "run", LOG, {"implementation": "HybridBN FBN_main.py", "seed": 2}, True)
    run = read_run(tmp_path / "run")
    assert run.status == "completed"
    assert run.summary["final_test_acc"] == pytest.approx(0.585)
    assert run.summary["best_test_acc"] == pytest.approx(0.6125)
    assert run.summary["rounds_completed"] == 3
    assert run.get("seed") == 2
    assert run.curve("test_acc")[0] == [1.0, 2.0, 3.0]
    assert (tmp_path / "run" / "run.log").read_text() == LOG


HBN_LOG = """Round   0, selected clients [0 1 2]
clients loss: [0.5, 0.7, 0.6], Average loss 0.600, Time 11.631
test: Acc 38.000, Loss 2.024
Round   1, selected clients [0 1 2]
clients loss: [0.4, 0.5, 0.3], Average loss 0.400, Time 10.2
test: Acc 47.500, Loss 1.500
"""


def test_rows_of_fedhbn_main_which_prints_clients_and_time():
    assert [(r["round"], r["test_acc"]) for r in hybridbn_rows(HBN_LOG)] == [(1, pytest.approx(0.38)),
                                                                             (2, pytest.approx(0.475))]


@pytest.mark.parametrize("log, finished", [(LOG, False), ("Round   0, selected client [1]\n", True)])
def test_interrupted_or_unevaluated_run_is_failed(tmp_path, log, finished):
    assert write_hybridbn_record(tmp_path, log, {}, finished)["status"] == "failed"
