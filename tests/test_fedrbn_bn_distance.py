"""``scripts/fedrbn_bn_distance.py``: BN_a's distance from BN_c per role and dual-BN layer, read from a
checkpoint (claim fedrbn/table1_bna_over_bnc's diagnosis). Exact values on hand-made statistics."""
from __future__ import annotations

import csv
import math

import pytest
import torch

from conftest import load_script
from fedbn_bench.engine.checkpoint import save_checkpoint


@pytest.fixture(scope="module")
def script():
    return load_script("fedrbn_bn_distance")


def user(mean_c, var_c, mean_a, var_a) -> dict[str, torch.Tensor]:
    def t(values):
        return torch.tensor(values, dtype=torch.float64)
    return {"conv.weight": torch.zeros(2), "bn.weight": torch.ones(2), "bn.running_mean": t(mean_c),
            "bn.running_var": t(var_c), "bn.adv_running_mean": t(mean_a), "bn.adv_running_var": t(var_a)}


def store() -> dict:
    eps = 1e-5
    at = user([0.0, 1.0], [1.0 - eps, 4.0 - eps], [0.5, 0.0], [4.0 - eps, 4.0 - eps])   # shift (0.5 + 0.5)/2, scale 1.5
    same = user([0.0, 1.0], [1.0, 4.0], [0.0, 1.0], [1.0, 4.0])                           # shift 0, scale 1
    return {"records": [{"role": "adversarial"}, {"role": "standard"}, {"role": "standard"}],
            "client_local": [at, same, same]}


def test_shift_and_scale_per_role_and_layer(script):
    rows = script.distances(store(), "r")
    assert [(r["role"], r["layer"], r["users"]) for r in rows] == [("adversarial", "bn", 1), ("standard", "bn", 2)]
    assert math.isclose(rows[0]["shift"], 0.5, rel_tol=1e-9) and math.isclose(rows[0]["scale"], 1.5, rel_tol=1e-9)
    assert rows[1]["shift"] == 0 and math.isclose(rows[1]["scale"], 1.0, rel_tol=1e-12)


def test_reads_a_checkpoint_and_writes_csv(script, tmp_path, capsys):
    save_checkpoint(tmp_path, {"store": store()})
    assert script.main([str(tmp_path), "--csv", str(tmp_path / "d.csv")]) == 0
    assert "| adversarial | bn | 1 | 0.500 | 1.500 |" in capsys.readouterr().out
    assert [r["role"] for r in csv.DictReader((tmp_path / "d.csv").open())] == ["adversarial", "standard"]


def test_a_store_without_dual_bn_is_an_error(script):
    plain = {"records": [{"role": "standard"}], "client_local": [{"bn.running_mean": torch.zeros(2)}]}
    with pytest.raises(SystemExit, match="error: .*no dual-BN"):
        script.distances(plain, "r")


def test_a_run_without_checkpoint_is_one_error_line(script, tmp_path, capsys):
    assert script.main([str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: ")
