"""FedRBN (Hong et al.): dual BN, propagation (Eq. 3-4), user roles, the AT and PNC objectives,
robust evaluation and the MAC count, each against an exact invariant."""
from __future__ import annotations

import copy
import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedbn_bench.adversarial.pixels import PixelSpace
from fedbn_bench.adversarial.roles import assign_roles
from fedbn_bench.adversarial.training import AdversarialConfig, FreeTraining, PGDTraining, clipped_term
from fedbn_bench.core.roles import ADVERSARIAL, STANDARD
from fedbn_bench.engine.checkpoint import load_checkpoint, save_checkpoint
from fedbn_bench.errors import ConfigError
from fedbn_bench.metrics import base as metrics_base
from fedbn_bench.metrics.base import evaluate
from fedbn_bench.metrics.robust_accuracy import robust_accuracy
from fedbn_bench.norms.dual_bn import DBNConfig, DualBatchNorm, DualBN
from fedbn_bench.norms.fedrbn import FedRBN, FedRBNConfig

from conftest import build_simulation

torch.set_default_dtype(torch.float32)


def small_net(norm) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), norm.norm_layer(4, 2), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 6 * 6, 8), norm.norm_layer(8, 1), nn.ReLU(), nn.Linear(8, 5))


# -- dual BN -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dims", [1, 2])
def test_clean_branch_equals_batchnorm_exactly(dims):
    torch.manual_seed(1)
    dbn, bn = DualBatchNorm(6, dims), (nn.BatchNorm2d if dims == 2 else nn.BatchNorm1d)(6)
    with torch.no_grad():
        for layer in (dbn, bn):
            layer.weight.copy_(torch.linspace(0.5, 2, 6))
            layer.bias.copy_(torch.linspace(-1, 1, 6))
    shape = (5, 6, 3, 3) if dims == 2 else (5, 6)
    for step in range(3):
        x = torch.randn(shape) * (step + 1) + step
        out_d, out_b = dbn(x), bn(x)
        assert torch.equal(out_d, out_b)
        out_d.square().sum().backward()
        out_b.square().sum().backward()
    for key in ("running_mean", "running_var", "num_batches_tracked"):
        assert torch.equal(getattr(dbn, key), getattr(bn, key)), key
    assert torch.equal(dbn.weight.grad, bn.weight.grad) and torch.equal(dbn.bias.grad, bn.bias.grad)
    dbn.eval(), bn.eval()
    x = torch.randn(shape)
    assert torch.equal(dbn(x), bn(x))
    assert torch.equal(dbn.adv_running_mean, torch.zeros(6)) and int(dbn.adv_num_batches_tracked) == 0


def test_branches_keep_separate_statistics_and_share_the_affine():
    norm = DualBN(DBNConfig())
    model = small_net(norm)
    layer = model[1]
    clean_x, adv_x = torch.randn(8, 3, 6, 6), torch.randn(8, 3, 6, 6) * 3 + 2
    with norm.branch(model, "adv"):
        model(adv_x)
    assert torch.equal(layer.running_mean, torch.zeros(4)) and int(layer.adv_num_batches_tracked) == 1
    adv_mean = layer.adv_running_mean.clone()
    with norm.branch(model, "clean"):
        model(clean_x)
    assert torch.equal(layer.adv_running_mean, adv_mean) and int(layer.num_batches_tracked) == 1
    assert layer.branch == "clean"  # the context restores the branch
    params = dict(model.named_parameters())
    assert "1.weight" in params and "1.bias" in params and not any("adv" in k for k in params)
    with norm.branch(model, "adv"):
        model(adv_x).sum().backward()
    assert params["1.weight"].grad is not None  # the one affine serves both branches
    with norm.branch(model, "adv", frozen=True):  # PNC's BN_a: running statistics in train mode
        before = layer.adv_running_mean.clone()
        out = model(adv_x)
        assert torch.equal(layer.adv_running_mean, before)
    model.eval()
    with norm.branch(model, "adv"):
        assert torch.allclose(out, model(adv_x))


def test_dbn_uploads_and_averages_both_branches():
    norm = DualBN(DBNConfig())
    model = small_net(norm)
    with norm.branch(model, "adv"):
        model(torch.randn(8, 3, 6, 6) + 3)
    stats = norm.client_statistics(model, 8)
    assert set(stats) == {"1", "1:adv", "5", "5:adv"}
    from fedbn_bench.core.aggregation import Aggregator
    out = norm.aggregate_statistics([stats, stats], torch.tensor([0.5, 0.5]), Aggregator(), {})
    assert torch.allclose(out["1.adv_running_mean"], model[1].adv_running_mean)
    assert torch.allclose(out["1.running_var"], model[1].running_var)


# -- propagation (Eq. 3-4) --------------------------------------------------------------------------
def client_state(clean_mean, clean_var, adv_mean, adv_var):
    return {"bn.running_mean": clean_mean, "bn.running_var": clean_var,
            "bn.adv_running_mean": adv_mean, "bn.adv_running_var": adv_var, "bn.weight": torch.ones(3)}


def domain_states(seed=0):
    """Users 0-2 are AT users of domains A, B, C; users 3-5 ST users of domains A, B, C."""
    g = torch.Generator().manual_seed(seed)
    centres = [torch.randn(3, generator=g) * 3 for _ in range(3)]
    states = []
    for user in range(6):
        c = centres[user % 3]
        noise = torch.randn(3, generator=g) * 0.01
        states.append(client_state(c + noise, c.abs() + 1 + noise.abs(), torch.randn(3, generator=g),
                                   torch.rand(3, generator=g) + 0.5))
    return states, [ADVERSARIAL] * 3 + [STANDARD] * 3


def test_propagation_weights_sum_to_one_and_uniform_is_the_plain_mean():
    states, roles = domain_states()
    norm = FedRBN(FedRBNConfig())
    alpha = norm.propagation_weights(states, [3, 4, 5], [0, 1, 2])
    assert torch.allclose(alpha.sum(1), torch.ones(3, dtype=torch.float64))
    uniform = FedRBN(FedRBNConfig(propagation="uniform"))
    propagated = copy.deepcopy(states)
    uniform.propagate(propagated, roles)
    mean = torch.stack([states[j]["bn.adv_running_mean"] for j in range(3)]).mean(0)
    var = torch.stack([states[j]["bn.adv_running_var"] for j in range(3)]).mean(0)
    for k in (3, 4, 5):
        assert torch.allclose(propagated[k]["bn.adv_running_mean"], mean)
        assert torch.allclose(propagated[k]["bn.adv_running_var"], var)
        assert torch.equal(propagated[k]["bn.running_mean"], states[k]["bn.running_mean"])  # clean untouched
    for j in range(3):  # AT users keep their own
        assert torch.equal(propagated[j]["bn.adv_running_mean"], states[j]["bn.adv_running_mean"])


def test_cosine_weights_pick_the_same_domain_user_as_temperature_goes_to_zero():
    states, roles = domain_states(3)
    norm = FedRBN(FedRBNConfig(temperature=1e-4))
    alpha = norm.propagation_weights(states, [3, 4, 5], [0, 1, 2])
    assert torch.allclose(alpha, torch.eye(3, dtype=torch.float64), atol=1e-6)
    norm.propagate(states, roles)
    for k in (3, 4, 5):
        assert torch.allclose(states[k]["bn.adv_running_mean"], states[k - 3]["bn.adv_running_mean"], atol=1e-5)


def test_cosine_weights_follow_eq4():
    states, _ = domain_states(5)
    alpha = FedRBN(FedRBNConfig()).propagation_weights(states, [4], [0, 1, 2])
    cos = lambda a, b: F.cosine_similarity(a.double(), b.double(), dim=0)  # noqa: E731
    s = torch.stack([(cos(states[4]["bn.running_mean"], states[j]["bn.running_mean"])
                      + cos(states[4]["bn.running_var"], states[j]["bn.running_var"])) / 2 for j in range(3)])
    assert torch.allclose(alpha[0], torch.softmax(s / 0.01, 0))


def test_no_propagation_leaves_every_state():
    states, roles = domain_states()
    before = copy.deepcopy(states)
    FedRBN(FedRBNConfig(propagation="none")).propagate(states, roles)
    assert all(torch.equal(a[k], b[k]) for a, b in zip(states, before) for k in a)


# -- roles -----------------------------------------------------------------------------------------
def test_roles_of_fedrbn_digits_settings():
    domains = [d for d in range(5) for _ in range(10)]
    names = ["MNIST", "SVHN", "USPS", "SynthDigits", "MNIST_M"]
    twenty = assign_roles(domains, names, 0.2, 3)
    assert [c for c, r in enumerate(twenty) if r == ADVERSARIAL] == [0, 1, 10, 11, 20, 21]
    assert assign_roles(domains, names, 1.0) == [ADVERSARIAL] * 50
    svhn = assign_roles(domains, names, 1.0, 1, ["SVHN", "MNIST", "USPS", "SynthDigits", "MNIST_M"])
    assert [c for c, r in enumerate(svhn) if r == ADVERSARIAL] == list(range(10, 20))
    assert assign_roles([None] * 10, [], 0.3) == [ADVERSARIAL] * 3 + [STANDARD] * 7
    with pytest.raises(ConfigError, match="domain_order"):
        assign_roles(domains, names, 1.0, 1, ["Clipart"])
    with pytest.raises(ConfigError, match="at_fraction"):
        assign_roles(domains, names, 1.5)


# -- objectives ------------------------------------------------------------------------------------
def pgd_objective(**options) -> PGDTraining:
    return PGDTraining(AdversarialConfig(name="pgd_at", **options), PixelSpace.of(torch.tensor(0.5), torch.tensor(0.5), 3))


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_attack_steps_change_no_buffer_and_leave_no_gradient(mode):
    norm = DualBN(DBNConfig())
    model = small_net(norm).train()
    before = {k: b.clone() for k, b in model.state_dict().items()}
    x, y = torch.rand(8, 3, 6, 6) * 2 - 1, torch.randint(0, 5, (8,))
    x_adv = pgd_objective(attack_mode=mode).adversarial_examples(model, norm, x, y)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters()) and model.training
    assert ((x_adv - x).abs() * 0.5).max() <= 8 / 255 + 1e-6  # pixels = 0.5 x + 0.5


def test_at_loss_is_the_mean_of_clean_and_adversarial_branch_losses():
    norm = DualBN(DBNConfig())
    model = small_net(norm)
    objective = pgd_objective()
    x, y = torch.rand(8, 3, 6, 6) * 2 - 1, torch.randint(0, 5, (8,))
    reference = copy.deepcopy(model)
    torch.manual_seed(4)
    loss = objective.client_loss(model, norm, x, y, ADVERSARIAL, lambda xb: F.cross_entropy(model(xb), y), 0)
    torch.manual_seed(4)
    x_adv = objective.adversarial_examples(reference, norm, x, y)
    clean = F.cross_entropy(reference(x), y)
    with norm.branch(reference, "adv"):
        adv = F.cross_entropy(reference(x_adv), y)
    assert torch.allclose(loss, (clean + adv) / 2)
    assert model[1].adv_num_batches_tracked == 1 and model[1].num_batches_tracked == 1


def test_clipped_term_keeps_the_value_and_clips_the_gradient():
    torch.manual_seed(2)
    model = nn.Linear(5, 3)
    x, y = torch.randn(16, 5) * 50, torch.randint(0, 3, (16,))
    term = F.cross_entropy(model(x), y)
    reference = copy.deepcopy(model)
    F.cross_entropy(reference(x), y).backward()
    norm = torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
    assert norm > 0.5  # the clip is active
    surrogate = clipped_term(term, model, 0.5)
    assert torch.allclose(surrogate, term.detach())
    surrogate.backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-6)


def test_pnc_loss_weights_the_frozen_adversarial_branch():
    norm = DualBN(DBNConfig())
    model = small_net(norm)
    with norm.branch(model, "adv"):
        model(torch.rand(8, 3, 6, 6))  # BN_a running statistics differ from BN_c's
    objective = pgd_objective(pnc_lambda=0.3, pnc_clip=None, pnc_warmup=2)
    x, y = torch.rand(8, 3, 6, 6) * 2 - 1, torch.randint(0, 5, (8,))
    loss_of = lambda xb: F.cross_entropy(model(xb), y)  # noqa: E731
    reference = copy.deepcopy(model)
    clean = F.cross_entropy(reference(x), y)
    with norm.branch(reference, "adv", frozen=True):
        adv = F.cross_entropy(reference(x), y)
    assert torch.allclose(objective.client_loss(model, norm, x, y, STANDARD, loss_of, 1), clean)  # warm-up
    assert torch.allclose(objective.client_loss(model, norm, x, y, STANDARD, loss_of, 2), 0.7 * clean + 0.3 * adv)


def test_pnc_needs_a_dual_norm():
    from fedbn_bench.norms.bn import BatchNorm, BNConfig
    with pytest.raises(ConfigError, match="pnc_lambda"):
        pgd_objective(pnc_lambda=0.5).validate(BatchNorm(BNConfig()))


def test_free_at_moves_delta_by_sign_steps_inside_the_ball():
    norm = DualBN(DBNConfig())
    model = small_net(norm)
    objective = FreeTraining(AdversarialConfig(name="free_at", eps=4 / 255, step_size=3 / 255, replays=4),
                             PixelSpace.of(None, None, 3))
    objective.begin_client(0)
    x, y = torch.rand(8, 3, 6, 6), torch.randint(0, 5, (8,))
    deltas = []
    for _ in range(3):
        loss = objective.client_loss(model, norm, x, y, ADVERSARIAL, lambda xb: F.cross_entropy(model(xb), y), 0)
        loss.backward()
        deltas.append((objective.delta.detach().clone(), objective.delta.grad.clone()))
    assert torch.equal(deltas[0][0], torch.zeros_like(x))
    expected = (deltas[1][0] + 3 / 255 * deltas[1][1].sign()).clamp(-4 / 255, 4 / 255)
    assert torch.allclose(deltas[2][0], expected)
    assert deltas[2][0].abs().max() <= 4 / 255 + 1e-7 and deltas[2][0].abs().max() > 0
    objective.begin_client(1)
    assert objective.delta is None


# -- the engine ------------------------------------------------------------------------------------
FEDRBN = ["dataset=sklearn_digits", "partition=domains", "num_clients=10", "model=fbn_cnn", "norm=fedrbn",
          "adversarial=pgd_at", "adversarial.at_fraction=0.5", "adversarial.steps=2", "batch_size=16", "seed=0"]


def test_fedrbn_round_propagates_to_st_users_and_records_roles(tmp_path):
    sim = build_simulation(FEDRBN, tmp_path, rounds=1, dtype=torch.float32)
    roles = [r.role for r in sim.store.records]
    assert roles == [ADVERSARIAL, STANDARD] * 5
    sim.run()
    local = sim.store.client_local
    key = next(k for k in local[0] if k.endswith("adv_running_mean"))
    at_stats = torch.stack([local[c][key] for c in range(0, 10, 2)]).double()
    alpha = sim.fed.norm.propagation_weights(local, list(range(1, 10, 2)), list(range(0, 10, 2)))
    for row, k in enumerate(range(1, 10, 2)):
        assert torch.allclose(local[k][key].double(), alpha[row] @ at_stats, atol=1e-6)
    rows = (tmp_path / "metrics.csv").read_text().splitlines()
    assert "robust_acc" in rows[0].split(",") and "val_select" not in rows[0].split(",")
    assert sim.engine == "loop"


def test_robust_accuracy_is_below_clean_accuracy_and_selection_uses_val_select(tmp_path):
    """And the summary reports every evaluation attack at the best validation round, as FedRBN Table 3
    reads them (App. C.1): the default PGD-7 (``robust_acc``) and a labelled PGD-1 (``pgd1_acc``)."""
    pgd = f"name:pgd,eps:{8 / 255},step_size:{2 / 255}"
    attacks = f"adversarial.eval_attacks=[{{{pgd},steps:7}},{{{pgd},steps:1,label:pgd1}}]"
    sim = build_simulation(FEDRBN + ["val_fraction=0.5", "adversarial.steps=3", attacks], tmp_path, rounds=2,
                           dtype=torch.float32)
    summary = sim.run()
    row = sim.loop.history[-1]
    assert row["robust_acc"] <= row["clean_acc"] and row["clean_acc"] == pytest.approx(row["test_acc"])
    assert summary["model_selection"] == "val_select"
    best = next(r for r in sim.loop.history if r["round"] == summary["best_val_round"])
    assert (summary["robust_acc_at_best_val"], summary["pgd1_acc_at_best_val"]) == (best["robust_acc"], best["pgd1_acc"])


def test_validation_is_attacked_for_the_at_users_only_and_selection_is_unchanged(tmp_path, monkeypatch):
    """An evaluation attacks every user's test data and only the AT users' validation data (the
    ST users' selection score is their clean validation accuracy, App. C.1), and evaluates each
    user's clean test and validation data once for both metrics; ``val_select`` and
    ``val_robust_acc`` equal their definitions, recomputed here user by user."""
    sim = build_simulation(FEDRBN + ["val_fraction=0.5"], tmp_path, rounds=1, dtype=torch.float32)
    sim.run()
    clean_evaluations = []
    outcomes = metrics_base.outcomes
    monkeypatch.setattr(metrics_base, "outcomes", lambda *args: clean_evaluations.append(1) or outcomes(*args))
    attacked = []
    for label, attack in list(sim.evaluator.robust_attacks.items()):
        def counting(model, x, y, attack=attack):
            attacked.append(len(y))
            return attack(model, x, y)
        sim.evaluator.robust_attacks[label] = counting
    row = sim.evaluator.evaluate()
    records, test_x, train_x = sim.store.records, sim.fed.data.test.x, sim.fed.data.train.x
    at_users = [c for c, r in enumerate(records) if r.role == ADVERSARIAL]
    tested = sum(len(test_x) if r.test_indices is None else len(r.test_indices) for r in records)
    assert 0 < len(at_users) < len(records)
    assert sum(attacked) == tested + sum(len(records[c].val_indices) for c in at_users)
    assert len(clean_evaluations) == 2 * len(records) and {"test_acc", "clean_acc"} <= row.keys()
    model, attack = sim.fed.model, next(iter(sim.evaluator.robust_attacks.values()))
    val_robust, select = [], []
    with sim.fed.norm.branch(model, sim.evaluator.test_branch):
        for c, r in enumerate(records):
            sim.store.load_client(model, c)
            vx, vy = train_x[r.val_indices], sim.fed.data.train.y[r.val_indices]
            if c in at_users:
                val_robust.append(robust_accuracy(model, attack, vx, vy, sim.evaluator.batch_size))
                select.append(val_robust[-1])
            else:
                select.append(evaluate(model, vx, vy, sim.evaluator.batch_size)[0])
    assert row["val_select"] == pytest.approx(sum(select) / len(select), abs=1e-12)
    assert row["val_robust_acc"] == pytest.approx(sum(val_robust) / len(val_robust), abs=1e-12)


def macs(tmp_path, steps: int) -> float:
    sim = build_simulation(FEDRBN + [f"adversarial.steps={steps}", "adversarial.at_fraction=1.0"],
                           tmp_path / str(steps), rounds=1, dtype=torch.float32, count_macs=True)
    summary = sim.run()
    assert json.loads((tmp_path / str(steps) / "summary.json").read_text())["train_macs_per_round"] == \
        summary["train_macs_per_round"]
    return summary["train_macs_per_round"]


@pytest.mark.slow  # three FedRBN rounds with robust evaluation (about 50 s)
def test_mac_count_includes_every_attack_step(tmp_path):
    m1, m2, m3 = (macs(tmp_path, k) for k in (1, 2, 3))
    assert m2 - m1 > 0 and m3 - m2 == pytest.approx(m2 - m1, rel=1e-9)


def test_role_assignment_survives_a_checkpoint(tmp_path):
    sim = build_simulation(FEDRBN, tmp_path, rounds=1, dtype=torch.float32)
    state = sim.store.state_dict()
    sim.store.records[0].role = STANDARD
    sim.store.load_state_dict(state)
    assert sim.store.records[0].role == ADVERSARIAL


def test_robust_test_at_the_best_validation_round_gives_the_every_evaluation_numbers(tmp_path):
    """``adversarial.robust_test=best_val`` attacks no test split during the run and tests the kept
    best-validation state once at the end: its ``*_at_best_val`` equal those of a run attacking
    the test splits at every evaluation, exactly. The best round here is not the last (lr 0.3
    swings the score), so testing the final state instead would give other numbers. The kept state
    goes through a checkpoint."""
    setting = FEDRBN + ["val_fraction=0.5", "lr=0.3", f"adversarial.eval_attacks=[{{name:pgd,eps:{8 / 255},steps:2}}]"]
    every = build_simulation(setting, tmp_path / "every", rounds=3, dtype=torch.float32)
    expected = every.run()
    best_row = next(r for r in every.loop.history if r["round"] == expected["best_val_round"])
    assert expected["best_val_round"] < 3 and best_row["robust_acc"] != every.loop.history[-1]["robust_acc"]
    deferred = build_simulation(setting + ["adversarial.robust_test=best_val"], tmp_path / "best", rounds=3,
                                dtype=torch.float32)
    summary = deferred.run()
    for key in ("best_val_round", "robust_acc_at_best_val", "clean_acc_at_best_val", "test_acc_at_best_val"):
        assert summary[key] == expected[key], key
    assert "final_robust_acc" not in summary
    assert all("robust_acc" not in row and "val_select" in row for row in deferred.loop.history)
    assert [r["val_select"] for r in deferred.loop.history] == [r["val_select"] for r in every.loop.history]
    assert deferred.store.global_state.keys() == every.store.global_state.keys()
    assert all(torch.equal(deferred.store.global_state[k], every.store.global_state[k]) for k in every.store.global_state)
    save_checkpoint(tmp_path / "best", deferred.loop.checkpoint_state())  # a resumed run keeps what it will test
    deferred.loop.best_selection = None
    deferred.loop.restore(load_checkpoint(tmp_path / "best"))
    assert deferred.loop.best_round_robust_test() == {"robust_acc_at_best_val": expected["robust_acc_at_best_val"]}


def test_robust_test_at_the_best_validation_round_needs_a_validation_split(tmp_path):
    with pytest.raises(ConfigError, match="adversarial.robust_test=best_val .* val_fraction > 0"):
        build_simulation(FEDRBN + ["adversarial.robust_test=best_val"], tmp_path, rounds=1, dtype=torch.float32)
    with pytest.raises(ConfigError, match="adversarial.robust_test='last' is unknown; allowed: every, best_val"):
        build_simulation(FEDRBN + ["adversarial.robust_test=last"], tmp_path, rounds=1, dtype=torch.float32)
