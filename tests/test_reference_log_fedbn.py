"""``records/reference_log.py`` on a FedBN ``fed_digits.py`` log (Li et al., ICLR 2021, §5.1): one row per
round of the five domains' test lines, under our domain names, ``test_acc``/``test_loss`` their unweighted
means (our ``client_accuracy`` columns); a round cut short is not counted, and the record reads back."""
from __future__ import annotations

import pytest

from fedbn_bench.records.reader import read_run
from fedbn_bench.records.reference_log import FEDBN_FIELDS, fedbn_rows, write_fedbn_record

ROUND = """============ Train epoch {e} ============
 MNIST      | Train Loss: 2.2895 | Train Acc: 0.1333
 SVHN       | Train Loss: 2.3029 | Train Acc: 0.1200
 USPS       | Train Loss: 2.3007 | Train Acc: 0.1800
 SynthDigits| Train Loss: 2.3092 | Train Acc: 0.0867
 MNIST-M    | Train Loss: 2.3033 | Train Acc: 0.1267
 MNIST      | Test  Loss: {l:.4f} | Test  Acc: 0.9000
 SVHN       | Test  Loss: 2.0000 | Test  Acc: 0.5000
 USPS       | Test  Loss: 1.0000 | Test  Acc: 0.7000
 SynthDigits| Test  Loss: 1.5000 | Test  Acc: 0.6000
 MNIST-M    | Test  Loss: 1.0000 | Test  Acc: {a:.4f}
"""
LOG = ("Device: cpu\n" + ROUND.format(e=0, l=0.5, a=0.3) + ROUND.format(e=1, l=1.0, a=0.8)
       + ROUND.format(e=2, l=0.5, a=0.3).split(" SynthDigits| Test")[0])
"""Two whole rounds, then a third cut off after USPS's test line."""


def test_rows_are_whole_rounds_under_our_domain_names():
    assert fedbn_rows(LOG) == [
        {"round": 1, "test_acc": pytest.approx(0.6), "test_loss": pytest.approx(1.2), "acc_mnist": 0.9,
         "acc_svhn_like": 0.5, "acc_usps_like": 0.7, "acc_synth_like": 0.6, "acc_mnistm_like": 0.3},
        {"round": 2, "test_acc": pytest.approx(0.7), "test_loss": pytest.approx(1.3), "acc_mnist": 0.9,
         "acc_svhn_like": 0.5, "acc_usps_like": 0.7, "acc_synth_like": 0.6, "acc_mnistm_like": 0.8},
    ]
    assert list(fedbn_rows(LOG)[0]) == FEDBN_FIELDS


def test_a_domain_twice_in_a_round_is_refused():
    with pytest.raises(ValueError, match="five digit domains"):
        fedbn_rows(" MNIST      | Test  Loss: 1.0000 | Test  Acc: 0.5000\n" * 2)


def test_record_reads_back_as_a_completed_run(tmp_path):
    write_fedbn_record(tmp_path / "run", LOG, {"norm": {"name": "fedbn"}, "seed": 1}, True)
    run = read_run(tmp_path / "run")
    assert run.status == "completed"
    assert run.summary["final_test_acc"] == pytest.approx(0.7)
    assert run.summary["best_test_acc"] == pytest.approx(0.7)
    assert run.summary["rounds_completed"] == 2
    assert run.get("norm.name") == "fedbn"
    assert run.curve("acc_mnistm_like") == ([1.0, 2.0], [0.3, 0.8])


def test_a_log_without_a_whole_round_is_a_failed_run(tmp_path):
    summary = write_fedbn_record(tmp_path / "run", LOG.split(" SVHN       | Test")[0], {}, True)
    assert summary == {"status": "failed"}
