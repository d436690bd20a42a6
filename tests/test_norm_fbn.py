"""FBN (fbn_federated_batchnorm.txt §4 Alg. 2, App. A) against centralized BatchNorm, exactly.

Also the §3 claim about naive BN (averaged running variance underestimates the pooled one) and a
reduced-size run of the 2-D toy (Fig. 2c).
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from torch import nn

from conftest import compose_config
from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.engine.backends import loop as loop_backend
from fedbn_bench.engine.settings import RunSettings
from fedbn_bench.engine.simulation import Simulation
from fedbn_bench.errors import ConfigError
from fedbn_bench.norms import NORMS, build_norm
from fedbn_bench.norms.fbn import FederatedBatchNorm, FederatedBatchNorm1d, FederatedBatchNorm2d
from fedbn_bench.records.loggers import NullLogger
from fedbn_bench.records.run_records import RunRecorder
from fedbn_bench.runner import build_federation
from fedbn_bench.toy.normalization import run_toy

TOL = {"rtol": 1e-4, "atol": 1e-5}


def norm_method(name: str, **kw):
    return build_norm(OmegaConf.structured(NORMS.get(name).config_class(**kw)))


def heterogeneous_batches(num_clients: int, shape: tuple[int, ...], seed: int) -> list[torch.Tensor]:
    """One batch per client, each shifted by its own mean (one 'class' per client)."""
    g = torch.Generator().manual_seed(seed)
    return [3.0 * i + (1 + i % 2) * torch.randn(*shape, generator=g) for i in range(num_clients)]


def federated_round(method, model, global_state, batches) -> None:
    """One statistics round as the engine runs it: load, train-mode forward, upload, aggregate."""
    stats = []
    for x in batches:
        model.load_state_dict(global_state)
        model.train()
        model(x)
        stats.append(method.client_statistics(model, len(x)))
    weights = torch.full((len(batches),), 1.0 / len(batches))
    global_state.update(method.aggregate_statistics(stats, weights, Aggregator(), global_state))


@pytest.mark.parametrize("shape", [(6, 3), (5, 3, 4, 4)])
def test_one_layer_statistics_equal_centralized_bn_on_union(shape):
    """App. A (RM), (RV): after every round the server holds torch BN's running stats of the union."""
    n, beta = 4, 0.1
    method = norm_method("fbn", momentum=beta, num_clients=n)
    model = nn.Sequential(method.norm_layer(3, len(shape) - 2 if len(shape) == 4 else 1))
    central = (nn.BatchNorm2d if len(shape) == 4 else nn.BatchNorm1d)(3, momentum=beta).train()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for t in range(5):
        batches = heterogeneous_batches(n, shape, seed=t)
        federated_round(method, model, state, batches)
        central(torch.cat(batches))
        torch.testing.assert_close(state["0.running_mean"], central.running_mean, **TOL)
        torch.testing.assert_close(state["0.running_var"], central.running_var, **TOL)


def test_naive_bn_underestimates_pooled_variance():
    """FBN §3: with one class per client (gamma=0) averaging the running variances misses the
    between-client variance; FBN's line-10 aggregation recovers it on the same batches."""
    n, beta, rounds = 5, 0.1, 30
    central = nn.BatchNorm1d(1, momentum=beta).train()
    results = {}
    for name in ("bn", "fbn"):
        kw = {"num_clients": n} if name == "fbn" else {}
        method = norm_method(name, momentum=beta, **kw)
        model = nn.Sequential(method.norm_layer(1, 1))
        state = {k: v.clone() for k, v in model.state_dict().items()}
        for t in range(rounds):
            batches = [10.0 * i + torch.randn(20, 1, generator=torch.Generator().manual_seed(100 * t + i)) for i in range(n)]
            federated_round(method, model, state, batches)
            if name == "bn":
                central(torch.cat(batches))
        results[name] = state["0.running_var"]
    pooled = central.running_var
    assert pooled.item() > 100  # between-client spread of the means 0, 10, ..., 40 dominates
    assert results["bn"].item() < 0.05 * pooled.item()
    torch.testing.assert_close(results["fbn"], pooled, **TOL)


class CentralizedFBN(nn.Module):
    """The centralized execution that App. A compares FBN with: normalize with the previous running
    statistics (constants), and let a torch BatchNorm in training mode update them on the union."""

    def __init__(self, layer: FederatedBatchNorm) -> None:
        super().__init__()
        self.weight, self.bias, self.eps = layer.weight, layer.bias, layer.eps
        bn = nn.BatchNorm2d if isinstance(layer, FederatedBatchNorm2d) else nn.BatchNorm1d
        self.bn = bn(layer.num_features, eps=layer.eps, momentum=layer.momentum, affine=False).train()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean, var = self.bn.running_mean.clone(), self.bn.running_var.clone()
        self.bn(x.detach())
        return F.batch_norm(x, mean, var, self.weight, self.bias, False, 0.0, self.eps)


def centralized_copy(model: nn.Module) -> nn.Module:
    ref = copy.deepcopy(model)
    for name, module in list(ref.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, FederatedBatchNorm):
                setattr(module, child_name, CentralizedFBN(child))
    return ref


MODELS = [["model=fbn_cnn", "+model.options.dropout=0.0"], ["model=mlp", "dataset=toy_gaussian"]]


def fbn_dsgd_simulation(tmp_path, monkeypatch, overrides: list[str]) -> tuple[Simulation, list[tuple[torch.Tensor, torch.Tensor]]]:
    """DSGD with FBN on a gamma=0 split (4 clients, batch 6), and the list that records the
    clients' batches of the current round as the engine hands them to the algorithm."""
    cfg = compose_config(["norm=fbn", "algo=dsgd", "partition=gamma", "gamma=0", "num_clients=4",
                          "clients_per_round=4", "batch_size=6", "lr=0.1", "device=cpu", *overrides])
    torch.manual_seed(cfg.seed)
    fed, _ = build_federation(cfg, torch.device("cpu"))
    settings = RunSettings(rounds=4, clients_per_round=4, batch_size=6, lr=0.1, schedule=cfg.algo.schedule,
                           seed=cfg.seed, eval_every=10, progress=False)
    captured: list[tuple[torch.Tensor, torch.Tensor]] = []
    train = loop_backend.train_model

    def spy(algo, norm, model, batches, lr, state, objective=None):
        batches = list(batches)
        captured.extend(batches)
        return train(algo, norm, model, batches, lr, state, objective)

    monkeypatch.setattr(loop_backend, "train_model", spy)
    return Simulation(fed, settings, RunRecorder(tmp_path), NullLogger()), captured


def fbn_layers(model: nn.Module) -> list[str]:
    return [n for n, m in model.named_modules() if isinstance(m, FederatedBatchNorm)]


def assert_statistics_equal(state: dict[str, torch.Tensor], reference: nn.Module, layers: list[str]) -> None:
    modules = dict(reference.named_modules())
    for name in layers:
        torch.testing.assert_close(state[f"{name}.running_mean"], modules[name].bn.running_mean, **TOL)
        torch.testing.assert_close(state[f"{name}.running_var"], modules[name].bn.running_var, **TOL)


@pytest.mark.parametrize("model_overrides", MODELS)
def test_engine_dsgd_statistics_equal_centralized_bn(tmp_path, monkeypatch, model_overrides):
    """App. A through the engine (DSGD with its default client momentum, gamma=0, multi-layer
    model, weights learning): after every round the server's statistics of every layer equal those
    of centralized BN run on the union of the clients' batches with the same weights."""
    sim, captured = fbn_dsgd_simulation(tmp_path, monkeypatch, model_overrides)
    naive: list[dict[str, torch.Tensor]] = []
    aggregate = sim.fed.norm.aggregate_statistics

    def naive_spy(stats, weights, aggregator, global_state):
        naive.append({f"{layer}.running_var": torch.stack([s[layer].var for s in stats]).mean(0) for layer in stats[0]})
        return aggregate(stats, weights, aggregator, global_state)

    sim.fed.norm.aggregate_statistics = naive_spy
    reference = centralized_copy(sim.fed.model)
    layers = fbn_layers(sim.fed.model)
    assert len(layers) >= 2
    for t in range(sim.s.rounds):
        weights = {k: v.clone() for k, v in sim.store.global_state.items() if "running" not in k}
        captured.clear()
        sim.run_round(t)
        reference.load_state_dict(weights, strict=False)
        reference.train()
        with torch.no_grad():
            reference(torch.cat([x for x, _ in captured]))
        assert_statistics_equal(sim.store.global_state, reference, layers)
    assert not torch.equal(weights["head.weight"], sim.store.global_state["head.weight"])
    keys = [f"{name}.running_var" for name in layers]
    with pytest.raises(AssertionError):  # the naive average of the variances would fail this test
        torch.testing.assert_close(torch.cat([naive[-1][k] for k in keys]), torch.cat([sim.store.global_state[k] for k in keys]), **TOL)


@pytest.mark.parametrize("model_overrides", MODELS)
def test_engine_dsgd_is_centralized_sgd_with_fbn(tmp_path, monkeypatch, model_overrides):
    """With raw gradients (client momentum 0, Alg. 3 exactly), DSGD + FBN trains the same weights
    and statistics as centralized SGD on the union batch with the same layer rule: FBN removes
    every federated effect on the model, round after round."""
    sim, captured = fbn_dsgd_simulation(tmp_path, monkeypatch, [*model_overrides, "algo.client_momentum=0.0"])
    reference = centralized_copy(sim.fed.model)
    layers = fbn_layers(sim.fed.model)
    for t in range(sim.s.rounds):
        captured.clear()
        sim.run_round(t)
        reference.train()
        reference.zero_grad()
        x, y = (torch.cat(v) for v in zip(*captured))
        F.cross_entropy(reference(x), y).backward()
        with torch.no_grad():
            for p in reference.parameters():
                p -= sim.s.lr * p.grad
        for k, p in reference.named_parameters():
            torch.testing.assert_close(sim.store.global_state[k], p.detach(), **TOL)
        assert_statistics_equal(sim.store.global_state, reference, layers)


def test_training_normalizes_with_received_statistics_without_their_gradient():
    """Alg. 2 line 3: every local step uses the received (shared) statistics, as constants."""
    layer = FederatedBatchNorm1d(3, momentum=0.5, num_clients=2)
    layer.load_state_dict({"running_mean": torch.tensor([1.0, -1.0, 0.5]), "running_var": torch.tensor([4.0, 1.0, 9.0]),
                           "weight": torch.tensor([2.0, 1.0, 0.5]), "bias": torch.tensor([0.0, 1.0, -1.0])})
    shared_mean, shared_var = layer.running_mean.clone(), layer.running_var.clone()
    layer.train()
    x = torch.randn(8, 3, requires_grad=True)
    for _ in range(2):
        out = layer(x)
        expected = (x - shared_mean) / torch.sqrt(shared_var + layer.eps) * layer.weight + layer.bias
        torch.testing.assert_close(out, expected)
    assert not torch.equal(layer.running_mean, shared_mean)
    (grad,) = torch.autograd.grad(out.sum(), x)
    torch.testing.assert_close(grad, (layer.weight / torch.sqrt(shared_var + layer.eps)).expand(8, 3))
    layer.eval()
    torch.testing.assert_close(layer(x), (x - layer.running_mean) / torch.sqrt(layer.running_var + layer.eps) * layer.weight + layer.bias)


def test_multistep_effective_correction_is_exact_for_repeated_batches():
    """Multi-step rounds: with S identical local batches, dividing the between term by
    1-(1-β)^S reproduces centralized BN over S steps; line 10 taken literally (÷β) does not."""
    n, beta, steps = 3, 0.2, 4
    batches = heterogeneous_batches(n, (7, 2), seed=0)
    central = nn.BatchNorm1d(2, momentum=beta).train()
    for _ in range(steps):
        central(torch.cat(batches))
    result = {}
    for correction in ("effective", "paper"):
        method = norm_method("fbn", momentum=beta, num_clients=n, multistep_correction=correction)
        model = nn.Sequential(method.norm_layer(2, 1))
        init = {k: v.clone() for k, v in model.state_dict().items()}
        stats = []
        for x in batches:
            model.load_state_dict(init)
            model.train()
            for _ in range(steps):
                model(x)
            stats.append(method.client_statistics(model, 8))
        result[correction] = method.aggregate_statistics(stats, torch.full((n,), 1.0 / n), Aggregator(), {})["0.running_var"]
    torch.testing.assert_close(result["effective"], central.running_var, **TOL)
    assert (result["paper"] - central.running_var).abs().min() > 1.0


@pytest.mark.parametrize("key, value", [("momentum", 0.0), ("momentum", 1.5), ("num_clients", 0),
                                        ("multistep_correction", "none")])
def test_bad_config_names_key(key, value):
    with pytest.raises(ConfigError, match=f"norm.{key}"):
        norm_method("fbn", **{key: value})


def test_registered_layers_and_keys():
    method = norm_method("fbn", num_clients=2)
    layer = method.norm_layer(4, 2)
    assert isinstance(layer, FederatedBatchNorm2d) and isinstance(layer, method.layer_types)
    assert set(layer.state_dict()) == {"weight", "bias", "running_mean", "running_var"}
    torch.testing.assert_close(layer.running_mean, torch.zeros(4))
    torch.testing.assert_close(layer.running_var, torch.ones(4))


def test_toy_fbn_error_is_heterogeneity_free_and_naive_grows():
    """Fig. 2c at reduced size: FBN's distance to centralized BN does not depend on gamma and is
    near zero once the running statistics have warmed up; naive BN's grows with heterogeneity."""
    gammas, rounds = (1.0, 0.5, 0.0), 40
    fbn = [run_toy("fbn", g, rounds=rounds).errors for g in gammas]
    naive = [run_toy("naive", g, rounds=rounds).errors.mean().item() for g in gammas]
    for errors in fbn[1:]:
        torch.testing.assert_close(errors, fbn[0], **TOL)
    assert fbn[0][-10:].mean() < 0.05
    assert naive[0] < naive[1] < naive[2]
    assert naive[2] > 20 * fbn[0][-10:].mean()


def test_hbn_code_variant_is_the_hbn_authors_fbn_baseline():
    """Audit #4: HybridBN's FBN layer keeps the round's plain average of batch means and biased
    variances; its server smooths the size-weighted mean with 0.1 and pools the variances around
    that smoothed mean over N - 1."""
    from fedbn_bench.core.updates import LayerStatistics
    from fedbn_bench.norms import build_norm

    norm = build_norm(compose_config(["norm=fbn", "norm.variant=hbn_code"]).norm)
    layer = norm.norm_layer(3, 2).double()
    layer.train()
    torch.manual_seed(0)
    batches = [torch.randn(4, 3, 2, 2, dtype=torch.float64) * (1 + k) + k for k in range(3)]
    for x in batches:
        layer(x)
    means = torch.stack([x.mean((0, 2, 3)) for x in batches])
    variances = torch.stack([x.var((0, 2, 3), unbiased=False) for x in batches])
    torch.testing.assert_close(layer.running_mean, means.mean(0))
    torch.testing.assert_close(layer.running_var, variances.mean(0))

    g = torch.Generator().manual_seed(1)
    sizes = torch.tensor([10.0, 30.0])
    stats = [{"bn": LayerStatistics(torch.randn(3, generator=g, dtype=torch.float64),
                                    torch.rand(3, generator=g, dtype=torch.float64) + 0.5,
                                    torch.tensor(n, dtype=torch.float64))} for n in sizes.tolist()]
    prev = {"bn.running_mean": torch.randn(3, generator=g, dtype=torch.float64),
            "bn.running_var": torch.rand(3, generator=g, dtype=torch.float64) + 0.5}
    out = norm.aggregate_statistics(stats, (sizes / sizes.sum()).double(), Aggregator(), prev)
    m = [s["bn"].mean for s in stats]
    v = [s["bn"].var for s in stats]
    mean = 0.1 * (10 * m[0] + 30 * m[1]) / 40 + 0.9 * prev["bn.running_mean"]
    var = 0.1 * (10 * (v[0] + (m[0] - mean) ** 2) + 30 * (v[1] + (m[1] - mean) ** 2)) / 39 + 0.9 * prev["bn.running_var"]
    torch.testing.assert_close(out["bn.running_mean"], mean)
    torch.testing.assert_close(out["bn.running_var"], var)
