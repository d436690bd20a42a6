"""Every FedRBN method preset trains 2 rounds on the embedded digits with synthetic feature-shift
domains, with its roles, records and robust evaluation; adversarial training buys robustness."""
from __future__ import annotations

import json

import pytest
import torch

from conftest import CONF, build_simulation
from fedbn_bench.core.roles import ADVERSARIAL, STANDARD

METHODS = sorted(p.stem for p in (CONF / "experiment" / "fedrbn" / "method").glob("*.yaml"))
BASE = ["dataset=sklearn_digits", "partition=domains", "num_clients=25", "model=fbn_cnn", "preset=fedrbn",
        "batch_size=16", "adversarial.steps=1", "adversarial.eval_attacks.0.steps=1", "seed=0",
        "+experiment/fedrbn/setting=digits_20"]


def test_every_method_is_tested():
    assert {"fedrbn", "fedrbn_l0", "fedrbn_l1", "fedrbn_wo_prop", "fatavg", "fatprox", "fatbn", "fatavg_dbn",
            "local_at", "fatavg_free", "fatbn_free"} == set(METHODS)


FAST = {"fedrbn", "fatbn", "fatavg_free"}
"""Run by default (dual BN + PNC + propagation, local BN, Free AT); the others under ``-m slow``."""


@pytest.mark.parametrize("method", [m if m in FAST else pytest.param(m, marks=pytest.mark.slow) for m in METHODS])
def test_method_runs_two_rounds_with_its_roles_and_robust_columns(method, tmp_path):
    sim = build_simulation(BASE + [f"+experiment/fedrbn/method={method}"], tmp_path, rounds=2, dtype=torch.float32,
                           count_macs=True)
    at_users = [c for c, r in enumerate(sim.store.records) if r.role == ADVERSARIAL]
    assert at_users == [0, 5, 10]  # 20 % of the users of the first 3 domains
    summary = sim.run()
    assert summary["status"] == "completed" and sim.engine == "loop"
    rows = [line.split(",") for line in (tmp_path / "metrics.csv").read_text().splitlines()]
    header = rows[0]
    assert len(rows) == 3 and {"robust_acc", "clean_acc", "val_select", "robust_acc_identity"} <= set(header)
    robust = float(rows[-1][header.index("robust_acc")])
    assert 0 <= robust <= float(rows[-1][header.index("clean_acc")])
    assert summary["model_selection"] == "val_select" and summary["train_macs_per_round"] > 0
    assert json.loads((tmp_path / "summary.json").read_text())["robust_acc_at_best_val"] is not None


@pytest.mark.slow
def test_adversarial_training_of_every_user_beats_standard_training_in_robust_accuracy(tmp_path):
    """Every user AT (FATAvg, setting all) against no AT user (setting none), same data and budget:
    robust accuracy must rise."""
    common = ["dataset=sklearn_digits", "partition=domains", "num_clients=10", "model=fbn_cnn", "preset=fedrbn",
              "batch_size=16", "lr=0.05", "val_fraction=0", "seed=0", "adversarial.eval_attacks.0.steps=10"]
    results = {}
    for setting in ("all", "none"):
        overrides = common + ["+experiment/fedrbn/method=fatavg", f"+experiment/fedrbn/setting={setting}"]
        sim = build_simulation(overrides, tmp_path / setting, rounds=15, dtype=torch.float32)
        assert {r.role for r in sim.store.records} == ({ADVERSARIAL} if setting == "all" else {STANDARD})
        sim.s.eval_every = 15
        results[setting] = sim.run()["final_robust_acc"]
    assert results["all"] > results["none"] + 0.05, results
