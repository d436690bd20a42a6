"""``scripts/fixbn_pooled_parts.py``: the per-layer gaps between averaged and pooled BN statistics and the models
that mix them (claim fixbn/sec3_4_pooled_statistics's diagnosis). Exact values on hand-set statistics."""
from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from conftest import load_script


@pytest.fixture(scope="module")
def script():
    return load_script("fixbn_pooled_parts")


def pair() -> tuple[nn.Module, nn.Module]:
    averaged = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)).double()
    pooled = copy.deepcopy(averaged)
    bn = pooled[1]
    bn.running_mean.copy_(torch.tensor([1.0, -2.0]))
    bn.running_var.copy_(torch.tensor([4.0, 1.0]) - 1e-5)   # σ_pool = 2, 1
    averaged[1].running_var.copy_(torch.tensor([4.0 * math.e, 1.0]) - 1e-5)
    return averaged.eval(), pooled.eval()


def test_layer_gaps_are_the_standardized_shift_and_log_ratio(script):
    averaged, pooled = pair()
    [(name, shift, log_ratio)] = script.layer_gaps(averaged, pooled)
    assert name == "1"
    assert math.isclose(shift, (1 / 2 + 2 / 1) / 2, rel_tol=1e-7)
    assert math.isclose(log_ratio, (1 + 0) / 2, rel_tol=1e-7)


def test_mixed_takes_only_the_named_part_from_pooled(script):
    averaged, pooled = pair()
    means = script.mixed(averaged, pooled, "running_mean")[1]
    assert torch.equal(means.running_mean, pooled[1].running_mean)
    assert torch.equal(means.running_var, averaged[1].running_var)
    variances = script.mixed(averaged, pooled, "running_var")[1]
    assert torch.equal(variances.running_var, pooled[1].running_var)
    assert torch.equal(variances.running_mean, averaged[1].running_mean)
    assert not averaged.training and torch.equal(averaged[1].running_mean, torch.zeros(2, dtype=torch.float64))
