"""Byzantine clients and robust aggregation (FBN §5): our rules and attacks against ``byzfl`` on
random inputs, robustness properties, the attack transform on statistics and weights, bit-identity
without an attack, FBN's robust aggregation near its exact one on i.i.d. clients, NaN-proof
records, and one clear error per bad key."""
from __future__ import annotations

import json

import byzfl
import pandas as pd
import pytest
import torch

from conftest import compose_config
from fedbn_bench.core.aggregation import AGGREGATORS, aggregate_states
from fedbn_bench.core.transforms import RoundInfo
from fedbn_bench.core.updates import ClientUpdate, LayerStatistics
from fedbn_bench.errors import ConfigError
from fedbn_bench.robust.aggregators import RobustConfig
from fedbn_bench.robust.attacks import ByzantineAttack, alie_z
from fedbn_bench.robust.byzantine import ByzantineConfig, byzantine_clients
from fedbn_bench.runner import run_experiment

F64 = {"rtol": 1e-12, "atol": 1e-12}
F32 = {"rtol": 1e-5, "atol": 1e-5}
"""byzfl computes in float32."""
RULES = {"median": lambda f: byzfl.Median(), "trimmed_mean": lambda f: byzfl.TrMean(f=f),
         "krum": lambda f: byzfl.Krum(f=f), "geometric_median": lambda f: byzfl.GeometricMedian()}


def rule(name: str, f: int = 3, nnm: bool = False):
    return AGGREGATORS.get(name)(RobustConfig(name=name, f=f, nnm=nnm))


def random_values(n: int = 10, shape=(4, 5), seed: int = 0) -> torch.Tensor:
    return torch.randn(n, *shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("nnm", [False, True])
@pytest.mark.parametrize("name", sorted(RULES))
def test_each_rule_agrees_with_byzfl(name, nnm):
    values = random_values()
    flat = values.reshape(10, -1)
    expected = RULES[name](3)(byzfl.NNM(f=3)(flat) if nnm else flat).reshape(4, 5).double()
    got = rule(name, nnm=nnm)(values, torch.full((10,), 0.1))
    assert got.dtype == torch.float64, "our rules keep the dtype"
    torch.testing.assert_close(got, expected, **F32)


@pytest.mark.parametrize("name", ["krum", "geometric_median"])
def test_distance_rules_see_the_whole_state(name):
    """``aggregate_states`` gives a distance-based rule every key of the state as one vector."""
    states = [{"a": random_values(10, (3,), 1)[i], "b": random_values(10, (2, 2), 2)[i]} for i in range(10)]
    flat = torch.stack([torch.cat([s["a"], s["b"].flatten()]) for s in states])
    expected = RULES[name](3)(flat).double()
    got = aggregate_states(rule(name), states, torch.full((10,), 0.1))
    torch.testing.assert_close(torch.cat([got["a"], got["b"].flatten()]), expected, **F32)


@pytest.mark.parametrize("nnm", [False, True])
@pytest.mark.parametrize("name", ["median", "trimmed_mean"])
def test_coordinate_rules_stay_in_the_honest_range_under_f_huge_outliers(name, nnm):
    honest = random_values(7, (20,), 3)
    values = torch.cat([honest, torch.full((3, 20), 1e12) * torch.tensor([1.0, -1.0, 1.0]).view(3, 1)])
    out = rule(name, nnm=nnm)(values, torch.full((10,), 0.1))
    lo, hi = honest.min(0).values, honest.max(0).values
    assert bool(((out >= lo - 1e-9) & (out <= hi + 1e-9)).all())


def test_median_after_nnm_returns_the_honest_mean_whatever_far_attackers_send():
    """When every honest client's n − f nearest rows are the honest ones, NNM gives the honest clients one
    average and a median of 10 values of which 7 coincide is that average: SF (−μ) and FOE (−0.1 μ) on
    positive statistics give the same aggregate to the bit (fbn/fig8_foe_defense_beats_undefended's diagnosis)."""
    honest = random_values(7, (64,), 6).abs() + 0.5
    aggregate = {attack: rule("median", nnm=True)(torch.cat([honest, bad.expand(3, -1)]), torch.full((10,), 0.1))
                 for attack, bad in (("sf", -honest.mean(0)), ("foe", -0.1 * honest.mean(0)))}
    assert torch.equal(aggregate["sf"], aggregate["foe"])
    torch.testing.assert_close(aggregate["sf"], honest.mean(0), **F64)


@pytest.mark.parametrize("nnm", [False, True])
@pytest.mark.parametrize("name", sorted(RULES))
def test_with_identical_inputs_every_rule_returns_them(name, nnm):
    same = random_values(1, (6,), 4).expand(7, 6).clone()
    out = rule(name, f=0, nnm=nnm)(same, torch.full((7,), 1 / 7))
    torch.testing.assert_close(out, same[0], rtol=1e-9, atol=1e-9)


def updates_with_statistics(n: int = 10, seed: int = 5) -> list[ClientUpdate]:
    g = torch.Generator().manual_seed(seed)
    return [ClientUpdate(c, {"w": torch.randn(3, generator=g, dtype=torch.float64)},
                         {"bn": LayerStatistics(torch.randn(4, generator=g, dtype=torch.float64),
                                                torch.rand(4, generator=g, dtype=torch.float64),
                                                torch.tensor(50.0, dtype=torch.float64))},
                         {}, 50, torch.zeros(())) for c in range(n)]


@pytest.mark.parametrize(("attack", "expected"), [
    ("sf", lambda h: byzfl.SignFlipping()(h)),
    ("foe", lambda h: byzfl.InnerProductManipulation(tau=0.1)(h)),
    ("alie", lambda h: byzfl.ALittleIsEnough(tau=alie_z(10, 3))(h)),
    ("mimic", lambda h: byzfl.Mimic(epsilon=0)(h)),
    ("inf", lambda h: torch.full((h.shape[1],), float("inf"), dtype=torch.float64)),
])
def test_each_attack_on_statistics_is_byzfls_on_the_honest_means(attack, expected):
    updates = updates_with_statistics()
    bad = frozenset({2, 5, 7})
    cfg = ByzantineConfig(f=3, attack=attack)
    out = ByzantineAttack(cfg, bad, 10)(updates, RoundInfo(0, 0, list(range(10))))
    honest_means = torch.stack([u.statistics["bn"].mean for u in updates if u.client not in bad])
    for u, original in zip(out, updates):
        if u.client in bad:
            torch.testing.assert_close(u.statistics["bn"].mean, expected(honest_means).to(torch.float64), **F32)
            assert torch.equal(u.statistics["bn"].var, original.statistics["bn"].var), "honest variance kept"
            assert torch.equal(u.weights["w"], original.weights["w"]), "weights untouched"
        else:
            assert u is original
    assert alie_z(10, 3) == pytest.approx(0.5244, abs=1e-4)  # Baruch et al.: s = 3, z = Φ⁻¹(0.7)


def test_attacked_variances_stay_variances():
    updates = updates_with_statistics()
    cfg = ByzantineConfig(f=3, attack="foe", foe_eps=5.0, variance="attacked")
    out = ByzantineAttack(cfg, frozenset({0, 1, 2}), 10)(updates, RoundInfo(0, 0, list(range(10))))
    assert all(bool((u.statistics["bn"].var == 0).all()) for u in out[:3]), "−5 × mean of variances, clamped at 0"


@pytest.mark.parametrize("reference", [None, {"w": torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)}])
def test_the_attack_on_weights_acts_on_the_change_when_weights_are_uploaded(reference):
    updates = updates_with_statistics()
    cfg = ByzantineConfig(f=3, attack="sf", target="weights")
    out = ByzantineAttack(cfg, frozenset({0, 1, 2}), 10)(updates, RoundInfo(0, 0, list(range(10)), reference))
    honest = torch.stack([u.weights["w"] for u in updates[3:]])
    base = 0 if reference is None else reference["w"]
    torch.testing.assert_close(out[0].weights["w"], base - (honest - base).mean(0), **F32)
    assert torch.equal(out[0].statistics["bn"].mean, updates[0].statistics["bn"].mean)


def test_byzantine_clients_are_a_fixed_seeded_set():
    a, b = byzantine_clients(10, 3, seed=0), byzantine_clients(10, 3, seed=0)
    assert a == b and len(a) == 3 and byzantine_clients(10, 3, seed=1) != a


COMMON = ["rounds=3", "eval_every=1", "num_clients=6", "algo.local_steps=2"]


def metrics(run_dir) -> pd.DataFrame:
    return pd.read_csv(run_dir / "metrics.csv").drop(columns="wall_s")


def test_byzantine_clients_without_an_attack_change_nothing(tmp_path):
    plain = run_experiment(compose_config([*COMMON, "byzantine=none"]), tmp_path / "plain")
    idle = run_experiment(compose_config([*COMMON, "byzantine.f=2", "byzantine.attack=none",
                                          "byzantine.defense=mean"]), tmp_path / "idle")
    labels = ["byzantine_f", "attack", "defense"]
    pd.testing.assert_frame_equal(metrics(tmp_path / "plain"), metrics(tmp_path / "idle").drop(columns=labels))
    assert plain["final_test_acc"] == idle["final_test_acc"]


@pytest.mark.slow  # three 60-round runs (about 70 s); the attacks and rules have exact tests above
def test_sign_flipping_without_defense_hurts_naive_bn_and_the_median_restores_it(tmp_path):
    """FBN §5's three scenarios with DSGD on i.i.d. digits: 3 of 10 clients flipping their running
    means pull the averaged mean to a fraction of the honest one (a fixed point near 0.06 of it
    under DSGD's one batch per round), which costs naive BN accuracy at test time; the median after
    NNM sees only honest-looking values. (The digits are too easy for the collapse to chance that
    FBN Fig. 4 shows on CIFAR-10: results/fbn/ has the reduced figure.)"""
    common = ["partition=iid", "algo=dsgd", "rounds=60", "eval_every=60", "lr=0.1", "batch_size=32",
              "num_clients=10"]
    clean = run_experiment(compose_config(common), tmp_path / "clean")
    attacked = run_experiment(compose_config([*common, "byzantine.f=3", "byzantine.attack=sf"]), tmp_path / "sf")
    defended = run_experiment(compose_config([*common, "byzantine=fbn"]), tmp_path / "median")
    assert attacked["final_test_acc"] < clean["final_test_acc"] - 0.05
    assert abs(defended["final_test_acc"] - clean["final_test_acc"]) < 0.03


def test_fbn_with_a_robust_rule_and_no_attack_stays_near_its_exact_aggregation(tmp_path):
    """On i.i.d. clients the clients' statistics differ only by sampling noise, so the median (after
    NNM) of their means and variances is close to the mean: the final accuracy stays within 5 points
    (the run-to-run spread of these 4-round digit runs is of that order)."""
    common = [*COMMON, "norm=fbn", "partition=iid", "rounds=4", "num_clients=10"]
    exact = run_experiment(compose_config(common), tmp_path / "exact")
    robust = run_experiment(compose_config([*common, "byzantine.defense=median", "byzantine.nnm=true"]),
                            tmp_path / "robust")
    assert exact["status"] == robust["status"] == "completed"
    assert abs(exact["final_test_acc"] - robust["final_test_acc"]) < 0.05


def test_metrics_and_summary_record_the_attack_and_the_defense(tmp_path):
    summary = run_experiment(compose_config([*COMMON, "byzantine.f=2", "byzantine.attack=alie",
                                             "byzantine.defense=trimmed_mean", "byzantine.nnm=true"]), tmp_path)
    rows = pd.read_csv(tmp_path / "metrics.csv")
    assert set(rows["attack"]) == {"alie"} and set(rows["defense"]) == {"trimmed_mean+nnm"}
    assert set(rows["byzantine_f"]) == {2}
    assert (summary["attack"], summary["defense"], summary["byzantine_f"]) == ("alie", "trimmed_mean+nnm", 2)


def test_an_infinite_attack_ends_diverged_with_every_record_kept(tmp_path):
    summary = run_experiment(compose_config([*COMMON, "byzantine.f=2", "byzantine.attack=inf",
                                             "byzantine.target=both"]), tmp_path)
    assert summary["status"] == "diverged"
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "diverged"
    assert (tmp_path / "metrics.csv").exists() and (tmp_path / "partition.csv").exists()


@pytest.mark.parametrize(("override", "key"), [
    (["byzantine.f=5"], "byzantine.f"), (["byzantine.attack=sf"], "byzantine.attack"),
    (["byzantine.attack=bogus", "byzantine.f=1"], "byzantine.attack"),
    (["byzantine.defense=mode"], "byzantine.defense"),
    (["byzantine.defense=median", "aggregator=krum"], "byzantine.defense"),
    (["byzantine.target=gradients"], "byzantine.target"),
])
def test_bad_input_fails_with_one_error_naming_the_key(override, key, tmp_path):
    with pytest.raises(ConfigError, match=key):
        run_experiment(compose_config([*COMMON, *override]), tmp_path)
    assert not (tmp_path / "metrics.csv").exists()
