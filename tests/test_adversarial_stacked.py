"""Adversarial training (FedRBN §3-4: PGD-AT, Free-AT, the PNC loss, dual BN) on the stacked
backends equals ``engine=loop``, in float64: each user role trains as one stack with the same
objective code as ``loop`` (``engine/backends/stacked_model.py``).

PGD starts at the clean input here (``random_start=false``): its random start, like dropout, draws
from one stream per stack instead of one per client (same distribution, other numbers).
"""
from __future__ import annotations

import pytest
import torch

from test_engine_equivalence import assert_equivalent

PGD = ["adversarial=pgd_at", "adversarial.steps=2", "adversarial.random_start=false", "adversarial.at_fraction=0.5"]
CASES = {
    "fedrbn": ["norm=fedrbn", *PGD],
    "fedrbn_pnc": ["norm=fedrbn", *PGD, "adversarial.pnc_lambda=0.5", "adversarial.pnc_clip=0.05"],
    "dbn_train_mode_attack": ["norm=dbn", *PGD, "adversarial.attack_mode=train"],
    "fatbn": ["norm=fedbn", *PGD],
    "free_at": ["norm=fedrbn", *PGD, "adversarial=free_at", "adversarial.replays=2"],
    "fedprox_fedrbn": ["norm=fedrbn", *PGD, "algo=fedprox", "algo.mu=0.1"],
}


@pytest.mark.parametrize("engine", ["vmap", "packed"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_adversarial_training_on_a_stacked_backend_equals_loop(case, engine, tmp_path):
    loop = assert_equivalent(CASES[case], tmp_path, torch.float64, engine=engine)
    roles = {record.role for record in loop.store.records}
    assert roles == {"adversarial", "standard"}, roles
