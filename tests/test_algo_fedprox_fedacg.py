"""FedProx (Li et al. 2020) and FedACG (Kim, Kim, Han 2024): reductions to FedAvg in float64, the
proximal gradient and the server step on hand-built tensors, local keys kept out of the server
momentum, bad options, and 2-round runs on the norms (engine equivalence: test_engine_equivalence)."""
from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from conftest import build_simulation, compose_config
from fedbn_bench.algorithms import ALGORITHMS, build_algorithm
from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.updates import ClientUpdate
from fedbn_bench.engine.simulation import Simulation
from fedbn_bench.errors import ConfigError
from fedbn_bench.runner import run_experiment

BASE = ["model=simple_cnn", "num_clients=6", "clients_per_round=3", "batch_size=32", "alpha=0.3", "lr=0.05"]
F64 = {"rtol": 1e-9, "atol": 1e-11}


def algo(name: str, **kw):
    return build_algorithm(OmegaConf.structured(ALGORITHMS.get(name).config_class(**kw)))


def simulate(overrides: list[str], tmp_path, rounds: int = 2) -> Simulation:
    """A ``rounds``-round run on ``engine=loop`` in float64."""
    sim = build_simulation([*BASE, *overrides], tmp_path / "_".join(overrides), rounds)
    for r in range(rounds):
        sim.run_round(r)
    return sim


@pytest.mark.parametrize("overrides", [
    ["algo=fedprox", "algo.mu=0"],
    ["algo=fedprox", "algo.mu=0", "algo.proximal=unsquared"],
    ["algo=fedacg", "algo.lam=0", "algo.beta=0"],
])
def test_reduces_to_fedavg_in_float64(overrides, tmp_path):
    fedavg = simulate(["algo=fedavg"], tmp_path).store.global_state
    other = simulate(overrides, tmp_path).store.global_state
    start = simulate(["algo=fedavg"], tmp_path, rounds=0).store.global_state
    assert any(not torch.equal(start[k], v) for k, v in fedavg.items()), "the run trained"
    assert fedavg.keys() == other.keys()
    for k in fedavg:
        torch.testing.assert_close(other[k], fedavg[k], **F64, msg=k)


def test_the_proximal_term_changes_the_run(tmp_path):
    """The reductions above compare something that matters: μ > 0 and β > 0 differ from FedAvg."""
    fedavg = simulate(["algo=fedavg"], tmp_path, rounds=1).store.global_state
    for overrides in (["algo=fedprox", "algo.mu=1"], ["algo=fedacg", "algo.beta=1"]):
        other = simulate(overrides, tmp_path, rounds=1).store.global_state
        assert any(not torch.allclose(other[k], v, rtol=1e-6) for k, v in fedavg.items()), overrides


def hand_built(clients: int | None):
    """Received params, moved params and gradients of one client (``None``) or a stack."""
    g = torch.Generator().manual_seed(0)
    shape = (clients,) if clients else ()
    received = {"w": torch.randn(*shape, 2, 3, generator=g), "b": torch.randn(*shape, 3, generator=g)}
    moved = {k: v + torch.randn(v.shape, generator=g) for k, v in received.items()}
    if clients:
        for v, r in zip(moved.values(), received.values()):
            v[-1] = r[-1]  # the last client has not moved: zero distance, the others unequal ones
    grads = {k: torch.randn(v.shape, generator=g) for k, v in received.items()}
    return received, moved, grads


def start_local(alg, received, clients: int | None):
    if not clients:
        return alg.start(received, {})
    locals_ = [alg.start({k: v[i] for k, v in received.items()}, {}) for i in range(clients)]
    return {"anchor": {k: torch.stack([l["anchor"][k] for l in locals_]) for k in received},
            "proximal_norm": torch.stack([l["proximal_norm"] for l in locals_])}


@pytest.mark.parametrize("clients", [None, 3], ids=["one", "stack"])
@pytest.mark.parametrize("name, kw", [("fedprox", {"mu": 0.3}), ("fedacg", {"beta": 0.3})])
def test_the_gradient_hook_adds_the_proximal_gradient(name, kw, clients):
    alg = algo(name, momentum=0.0, clip_grad_norm=None, **kw)
    received, moved, grads = hand_built(clients)
    local = start_local(alg, received, clients)
    assert all(local["anchor"][k] is not received[k] for k in received)
    out = alg.gradient_hook(grads, moved, local)
    for k in grads:
        torch.testing.assert_close(out[k], grads[k] + 0.3 * (moved[k] - received[k]), rtol=0, atol=1e-7)


@pytest.mark.parametrize("clients", [None, 3], ids=["one", "stack"])
def test_the_unsquared_variant_adds_half_mu_times_the_unit_direction(clients):
    alg = algo("fedprox", momentum=0.0, clip_grad_norm=None, mu=0.3, proximal="unsquared")
    received, moved, grads = hand_built(clients)
    local = start_local(alg, received, clients)
    out = alg.gradient_hook(grads, moved, local)
    rows = [None] if not clients else range(clients)
    for i in rows:
        pick = (lambda t: t) if i is None else (lambda t, i=i: t[i])
        diff = {k: pick(moved[k]) - pick(received[k]) for k in grads}
        norm = torch.sqrt(sum(d.square().sum() for d in diff.values()))
        for k in grads:
            expected = pick(grads[k]) + (0.15 * diff[k] / norm if norm > 0 else 0)
            torch.testing.assert_close(pick(out[k]), expected, rtol=0, atol=1e-7)
    if clients:
        assert torch.equal(out["w"][-1], grads["w"][-1]), "zero distance: no term, no NaN"


def test_clipping_applies_to_the_total_gradient_as_torch_does():
    """loss + μ/2‖w − w_g‖², backward, then clip_grad_norm_ (FedBN's / HBN's code order)."""
    alg = algo("fedprox", momentum=0.0, clip_grad_norm=0.5, mu=0.3)
    received, moved, grads = hand_built(None)
    out = alg.gradient_hook(grads, moved, alg.start(received, {}))
    ref = [torch.nn.Parameter(moved[k].clone()) for k in grads]
    for p, k in zip(ref, grads):
        p.grad = grads[k] + 0.3 * (moved[k] - received[k])
    torch.nn.utils.clip_grad_norm_(ref, 0.5)
    for p, k in zip(ref, grads):
        torch.testing.assert_close(out[k], p.grad)


@pytest.mark.parametrize("clients", [None, 3], ids=["one", "stack"])
@pytest.mark.parametrize("overrides, penalty_weight", [
    ([], 0.5e-3),                         # the paper (default): β/2 ‖θ − θ_la‖², pull 1e-3 (θ − θ_la)
    (["algo.proximal=squared"], 1e-3),    # the authors' code: weight · Σ(θ − θ_la)², pull 2e-3 (θ − θ_la)
])
def test_fedacg_pull_toward_the_lookahead_is_the_gradient_of_its_penalty(overrides, penalty_weight, clients):
    """At the default β = 1e-3, the hook adds exactly autograd's gradient of ``penalty_weight ·
    ‖θ − θ_lookahead‖²`` (float64): 1e-3 (θ − θ_la) for the paper's β/2, 2e-3 for the code's β."""
    cfg = compose_config(["algo=fedacg", "algo.momentum=0", "algo.clip_grad_norm=null", *overrides]).algo
    alg = build_algorithm(cfg)
    assert alg.cfg.beta == 1e-3
    received, moved, grads = ({k: v.double() for k, v in tree.items()} for tree in hand_built(clients))
    out = alg.gradient_hook(dict(grads), moved, start_local(alg, received, clients))
    theta = {k: v.clone().requires_grad_(True) for k, v in moved.items()}
    penalty = penalty_weight * sum((theta[k] - received[k]).square().sum() for k in theta)
    penalty.backward()
    for k in grads:
        torch.testing.assert_close(out[k] - grads[k], theta[k].grad, **F64)
        torch.testing.assert_close(out[k] - grads[k], 2 * penalty_weight * (moved[k] - received[k]), **F64)


def test_fedacg_server_step_and_broadcast_follow_algorithm_1():
    lam = 0.8
    alg = algo("fedacg", lam=lam)
    g = torch.Generator().manual_seed(1)
    theta = {"w": torch.randn(4, generator=g), "bn.weight": torch.randn(2, generator=g)}
    m0 = torch.randn(4, generator=g)
    alg.global_momentum = {"w": m0.clone()}
    lookahead = alg.broadcast(theta, 0)
    torch.testing.assert_close(lookahead["w"], theta["w"] + lam * m0)
    assert torch.equal(lookahead["bn.weight"], theta["bn.weight"]), "no momentum: the global value"
    uploads = [theta["w"] + torch.randn(4, generator=g) for _ in range(2)]  # "bn.weight" kept local
    weights = torch.tensor([0.25, 0.75])
    updates = [ClientUpdate(c, {"w": u}, {}, {}, 1, torch.zeros(())) for c, u in enumerate(uploads)]
    new = alg.server_update(theta, updates, weights, Aggregator(), lr=0.1)
    delta = 0.25 * uploads[0] + 0.75 * uploads[1] - (theta["w"] + lam * m0)
    m1 = lam * m0 + delta
    assert new.keys() == alg.global_momentum.keys() == {"w"}
    torch.testing.assert_close(alg.global_momentum["w"], m1)
    torch.testing.assert_close(new["w"], theta["w"] + m1)


def test_fedacg_keeps_local_keys_out_of_the_server_momentum(tmp_path):
    sim = simulate(["norm=fedbn", "algo=fedacg"], tmp_path)
    momentum = sim.fed.algo.global_momentum
    local = set(sim.store.local_keys)
    assert local and momentum
    assert not local & momentum.keys()
    shared = {k for k, _ in sim.fed.model.named_parameters()} - local
    assert momentum.keys() == shared
    lookahead = sim.fed.algo.broadcast(sim.store.global_state, 0)
    for k in local:
        assert torch.equal(lookahead[k], sim.store.global_state[k])


@pytest.mark.parametrize("override, key", [
    ("algo.mu=-1", "algo.mu"), ("algo.proximal=half", "algo.proximal"),
])
def test_fedprox_bad_options(override, key):
    with pytest.raises(ConfigError, match=key):
        build_algorithm(compose_config(["algo=fedprox", override]).algo)


@pytest.mark.parametrize("override, key", [("algo.lam=1", "algo.lam"), ("algo.beta=-0.1", "algo.beta"),
                                           ("algo.proximal=half", "algo.proximal")])
def test_fedacg_bad_options(override, key):
    with pytest.raises(ConfigError, match=key):
        build_algorithm(compose_config(["algo=fedacg", override]).algo)


@pytest.mark.parametrize("norm", ["bn", "fedbn", "fbn", "hbn", "gn"])
@pytest.mark.parametrize("name", ["fedprox", "fedacg"])
def test_runs_two_rounds_on_every_norm(name, norm, tmp_path):
    summary = run_experiment(compose_config([f"algo={name}", f"norm={norm}", "rounds=2", "algo.local_steps=2",
                                             "num_clients=4"]), tmp_path)
    assert summary["status"] == "completed"


@pytest.mark.parametrize("algo", ["fedprox", "fedacg"])
def test_keys_a_norm_keeps_local_have_no_proximal_term(tmp_path, algo):
    """Issue 12: FedBN's BN keys stay on their client, so they are never in the proximal anchor."""
    sim = build_simulation([f"algo={algo}", "norm=fedbn", "num_clients=4", "algo.local_steps=1"], tmp_path,
                           rounds=1, dtype=torch.float32)
    fed = sim.fed
    local = set(sim.store.local_keys)
    params = {k: p.detach() for k, p in fed.model.named_parameters()}
    anchor = fed.algo.start(params, {})["anchor"]
    assert local and fed.algo.local_keys == local & set(fed.model.state_dict())
    assert anchor and not local & set(anchor) and set(anchor) | (local & set(params)) == set(params)
