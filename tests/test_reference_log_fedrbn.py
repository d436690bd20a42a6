"""``records/reference_log.py`` on FedRBN ``fedat.py`` logs (Hong et al., AAAI 2023, §5, App. C.1): one row per
validated round (their average as ``val_select``, the AT users' mean, each user), SA and RA at their best
validation round from the two tests of its checkpoint; a record that reads back and that ``compare.py`` compares
by ``robust_acc_at_best_val``; and what ``scripts/parity/fedrbn.py`` hands their argparse and shims."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from fedbn_bench.records.reader import read_run
from fedbn_bench.records.reference_log import fedrbn_rows, fedrbn_test, write_fedrbn_record

ROOT = Path(__file__).resolve().parents[1]

TRAIN = """ train size: [120, 120]
 test  size: [40, 40]
  mean_batch_iters: 2
============ Round 0 ============
Copy BN: [0, 2] -> [1, 3]
 * copy [0, 2] -> 0-1 clean
 * copy [0, 2] -> 1-1 clean
 Client-0-0 noised| Train Loss: 2.403 | Train Acc: 6.7% | Elapsed: 1.92 s
 Client-0-1 clean | Train Loss: 2.486 | Train Acc: 8.3% | Elapsed: 0.34 s
 Client-1-0 noised| Train Loss: 2.458 | Train Acc: 3.3% | Elapsed: 2.06 s
 Client-1-1 clean | Train Loss: 2.451 | Train Acc: 5.0% | Elapsed: 0.38 s
 0-0 noised | Val  Acc: 10.0%
 0-1 clean  | Val  Acc: 20.0%
 1-0 noised | Val  Acc: 30.0%
 1-1 clean  | Val  Acc: 40.0%
 Avg Val Acc: 0.250
Update best Acc.
 Client-0-0 noised| Epoch:0 | Val Acc: 0.1000
 Client-0-1 clean | Epoch:0 | Val Acc: 0.2000
 Client-1-0 noised| Epoch:0 | Val Acc: 0.3000
 Client-1-1 clean | Epoch:0 | Val Acc: 0.4000
 Saving the local and server checkpoint to ./checkpoint/fedrbn/Digits/fedrbn__pd_nuser_2...
============ Round 1 ============
 Client-0-0 noised| Train Loss: 2.058 | Train Acc: 36.7% | Elapsed: 2.12 s
 0-0 noised | Val  Acc: 12.5%
 0-1 clean  | Val  Acc: 22.5%
 1-0 noised | Val  Acc: 36.7%
 1-1 clean  | Val  Acc: 41.2%
 Avg Val Acc: 0.282
Update best Acc.
 Client-0-0 noised| Epoch:1 | Val Acc: 0.1250
============ Round 2 ============
 0-0 noised | Val  Acc: 50.0%
 0-1 clean  | Val  Acc: 60.0%
"""
"""Two validated rounds, then a third cut off before its average."""


def checkpoint_log(average: str) -> str:
    """A test of the round-1 checkpoint that prints ``average``."""
    return f"""Loading chkpt from ./checkpoint/fedrbn/Digits/fedrbn__pd_nuser_2
Resume training from epoch 2 with best acc:
 Best site-0-0 noised| Epoch:1 | Val Acc: 0.1250
 Best site-0-1 clean | Epoch:1 | Val Acc: 0.2250
 Best site-1-0 noised| Epoch:1 | Val Acc: 0.3670
 Best site-1-1 clean | Epoch:1 | Val Acc: 0.4120
Copy BN: [0, 2] -> [1, 3]
 0-0 noised | Test  Acc: 55.0%
 0-1 clean  | Test  Acc: 65.0%
 1-0 noised | Test  Acc: 75.0%
 1-1 clean  | Test  Acc: 85.0%

 Average Test Acc: {average}
"""


LOGS = {"train": TRAIN, "clean": checkpoint_log("0.7012345"), "robust": checkpoint_log("0.4123456")}


def test_rows_are_validated_rounds_from_one():
    assert fedrbn_rows(TRAIN) == [
        {"round": 1, "val_select": 0.25, "val_robust_acc": pytest.approx(0.2), "val_client_acc_0": 0.1,
         "val_client_acc_1": 0.2, "val_client_acc_2": 0.3, "val_client_acc_3": 0.4},
        {"round": 2, "val_select": 0.282, "val_robust_acc": pytest.approx(0.246), "val_client_acc_0": 0.125,
         "val_client_acc_1": 0.225, "val_client_acc_2": 0.367, "val_client_acc_3": 0.412},
    ]


def test_a_test_gives_its_checkpoint_round_and_average():
    assert fedrbn_test(LOGS["robust"]) == (1, 0.4123456)
    assert fedrbn_test(LOGS["robust"].split("\n Average")[0]) is None


def test_record_reads_back_with_sa_and_ra_at_the_best_validation_round(tmp_path):
    summary = write_fedrbn_record(tmp_path / "run", LOGS, {"norm": {"name": "fedrbn"}, "seed": 1}, True)
    assert summary == {"status": "completed", "rounds_completed": 2, "best_val_round": 2,
                       "model_selection": "val_select", "test_acc_at_best_val": 0.7012345,
                       "clean_acc_at_best_val": 0.7012345, "robust_acc_at_best_val": 0.4123456}
    run = read_run(tmp_path / "run")
    assert run.status == "completed" and run.get("norm.name") == "fedrbn"
    assert run.curve("val_select") == ([1.0, 2.0], [0.25, 0.282])
    assert run.curve("val_client_acc_2") == ([1.0, 2.0], [0.3, 0.367])
    log = (tmp_path / "run" / "run.log").read_text()
    assert log.index("[parity] train\n") < log.index("[parity] clean\n") < log.index("[parity] robust\n")


def test_a_run_without_its_robust_test_is_failed(tmp_path):
    summary = write_fedrbn_record(tmp_path / "run", {"train": TRAIN, "clean": LOGS["clean"]}, {}, True)
    assert summary["status"] == "failed"
    assert "robust_acc_at_best_val" not in summary and summary["test_acc_at_best_val"] == 0.7012345


def test_tests_of_different_checkpoints_are_refused(tmp_path):
    other = LOGS["robust"].replace("Epoch:1", "Epoch:0")
    with pytest.raises(ValueError, match="different checkpoints"):
        write_fedrbn_record(tmp_path / "run", {**LOGS, "robust": other}, {}, True)


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"parity_{name}", ROOT / "scripts" / "parity" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ours(directory: Path, robust: float) -> None:
    """Our record of a FedRBN run, reduced to what the comparison reads."""
    (directory / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create({"seed": 0, "norm": {"name": "fedrbn"}}), directory / ".hydra" / "config.yaml")
    (directory / "metrics.csv").write_text("round,val_select\n1,0.2\n2,0.3\n")
    (directory / "summary.json").write_text(json.dumps({"status": "completed", "final_test_acc": 0.9,
                                                        "robust_acc_at_best_val": robust}))


def test_compare_sets_their_ra_beside_ours(tmp_path):
    for seed, robust in enumerate(["0.40", "0.44"]):
        logs = {**LOGS, "robust": checkpoint_log(robust)}
        write_fedrbn_record(tmp_path / "authors" / f"s{seed}", logs, {"implementation": "FedRBN fedat.py",
                                                                      "norm": {"name": "fedrbn"}}, True)
        ours(tmp_path / "ours" / f"s{seed}", [0.50, 0.52][seed])
    out = tmp_path / "fedrbn"
    assert load("compare").main(["--authors", str(tmp_path / "authors"), "--ours", str(tmp_path / "ours"), "--out",
                                 str(out), "--metric", "robust_acc_at_best_val", "--curve", "val_select"]) == 0
    assert ("| fedrbn | FedRBN fedat.py | norm=fedrbn | 42.00 ± 2.83 (2) | 51.00 ± 1.41 (2) | +9.00 |"
            in out.with_suffix(".md").read_text())


@pytest.fixture(scope="module")
def wrapper():
    return load("fedrbn")


def test_the_tests_reuse_the_training_arguments(wrapper):
    train = ["--rounds", "2", "--mode", "fedrbn"]
    assert wrapper.test_arguments(train, "robust", "adv") == [
        *train, "--test", "--test_noise", "LinfPGD", "--te_att_BNn", "--oracle_detector", "noised"]
    assert wrapper.test_arguments(train, "clean", "clean") == [*train, "--test", "--test_noise", "none"]


def test_an_option_the_wrapper_sets_is_refused_after_the_separator(wrapper, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["fedrbn.py", "--code", "x", "--mode", "fedrbn", "--record", "y", "--",
                                      "--seed", "3"])
    with pytest.raises(SystemExit):
        wrapper.parse()


def test_shims_zero_gradients_and_force_their_options(wrapper):
    x = torch.ones(3, requires_grad=True)
    x.sum().backward()
    wrapper.zero_gradients([x])
    assert torch.equal(x.grad, torch.zeros(3))
    assert wrapper.serial(lambda *a, **k: k)([0], num_workers=4, pin_memory=True) == {"num_workers": 0,
                                                                                      "pin_memory": True}
    assert wrapper.disabled(lambda **k: k)(mode="offline", project="p") == {"mode": "disabled", "project": "p"}
