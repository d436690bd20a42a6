"""FL algorithms against exact references (float tolerance), and the learning-rate schedules."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from fedbn_bench.algorithms import build_algorithm
from fedbn_bench.algorithms.schedules import ScheduleConfig, learning_rate
from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.updates import ClientUpdate
from fedbn_bench.engine.backends.loop import train_model
from fedbn_bench.models import build_model
from fedbn_bench.norms.base import NormMethod


def algo(name: str, **kw):
    from fedbn_bench.algorithms import ALGORITHMS

    cfg = OmegaConf.structured(ALGORITHMS.get(name).config_class(**kw))
    return build_algorithm(cfg)


def tiny_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model("mlp", NormMethod(None).norm_layer, (6,), 3)


def client_batches(num_clients: int = 4, b: int = 5, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(b, 6, generator=g), torch.randint(0, 3, (b,), generator=g)) for _ in range(num_clients)]


def centralized_step(model, batches, lr):
    """One plain SGD step on the union of the clients' batches."""
    ref = copy.deepcopy(model)
    x = torch.cat([b[0] for b in batches])
    y = torch.cat([b[1] for b in batches])
    ref.zero_grad()
    F.cross_entropy(ref(x), y).backward()
    return {k: p.detach() - lr * p.grad for k, p in ref.named_parameters()}


def local_train(alg, model, batches, lr, state):
    """The upload and mean loss of one client's local training; ``state`` is updated in place."""
    upload, _, new_state, loss = train_model(alg, NormMethod(None), model, batches, lr, state)
    state.clear()
    state.update(new_state)
    return upload, loss


def run_round(alg, model, batches, lr):
    start = {k: v.clone() for k, v in model.state_dict().items()}
    updates = []
    for client, batch in enumerate(batches):
        model.load_state_dict(start)
        upload, loss = local_train(alg, model, [batch], lr, {})
        updates.append(ClientUpdate(client, upload, {}, {}, len(batch[1]), loss))
    sizes = torch.tensor([len(b[1]) for b in batches])
    return alg.server_update(start, updates, alg.client_weights(sizes), Aggregator(), lr)


@pytest.mark.parametrize("name, kw", [("fedavg", {}), ("dsgd", {"client_momentum": 0.0})])
def test_one_step_equals_centralized_sgd_on_union_batch(name, kw):
    model, batches, lr = tiny_model(), client_batches(), 0.1
    expected = centralized_step(model, batches, lr)
    got = run_round(algo(name, lr=lr, **kw), model, batches, lr)
    for k in expected:
        torch.testing.assert_close(got[k], expected[k], rtol=1e-5, atol=1e-6)


def test_fedavg_weights_clients_by_data_size():
    model, lr = tiny_model(), 0.1
    batches = client_batches(2, b=4)
    batches[1] = (torch.cat([batches[1][0]] * 3), torch.cat([batches[1][1]] * 3))
    expected = centralized_step(model, batches, lr)
    got = run_round(algo("fedavg", lr=lr), model, batches, lr)
    for k in expected:
        torch.testing.assert_close(got[k], expected[k], rtol=1e-5, atol=1e-6)


def test_dsgd_client_momentum_is_an_ema_of_gradients():
    alg, model = algo("dsgd", lr=0.1, client_momentum=0.9), tiny_model()
    (b1, b2) = client_batches(2)
    state: dict = {}
    g1, _ = local_train(alg, model, [b1], 0.1, state)
    m2, _ = local_train(alg, model, [b2], 0.1, state)
    g2, _ = local_train(algo("dsgd", lr=0.1, client_momentum=0.0), model, [b2], 0.1, {})
    for k in g1:
        torch.testing.assert_close(m2[k], 0.9 * g1[k] + 0.1 * g2[k])


def test_fedavg_optimizer_state_resets_every_round():
    alg, model = algo("fedavg", lr=0.1, momentum=0.9), tiny_model()
    (batch,) = client_batches(1)
    start = copy.deepcopy(model.state_dict())
    first, _ = local_train(alg, model, [batch], 0.1, {})
    model.load_state_dict(start)
    again, _ = local_train(alg, model, [batch], 0.1, {})
    for k in first:
        torch.testing.assert_close(first[k], again[k])


def test_centralized_uses_the_union_batch():
    alg = algo("centralized", lr=0.1)
    assert alg.batch_size(16, 10) == 160 and alg.pools_clients
    assert algo("centralized", lr=0.1, union_batch=False).batch_size(16, 10) == 16


def test_schedules():
    piece = OmegaConf.structured(ScheduleConfig(name="piecewise", milestones=[1000, 2000], rates=[0.1, 0.05, 0.033]))
    assert [learning_rate(0.1, piece, r, 3000) for r in (0, 999, 1000, 2999)] == [0.1, 0.1, 0.05, 0.033]
    multi = OmegaConf.structured(ScheduleConfig(name="multistep", milestones=[0.5, 0.75]))
    assert [learning_rate(1.0, multi, r, 100) for r in (49, 50, 74, 75)] == pytest.approx([1.0, 0.1, 0.1, 0.01])
    expo = OmegaConf.structured(ScheduleConfig(name="exponential", decay=0.998))
    assert learning_rate(0.1, expo, 10, 100) == pytest.approx(0.1 * 0.998**10)


def test_gradient_clipping_matches_torch_per_client():
    """``algo.clip_grad_norm`` (HBN's code: ``clip_grad_norm_(max_norm=10)``) scales each client's
    gradients by its own total norm, on one client and on a stack of clients alike."""
    from fedbn_bench.algorithms.base import clip_by_total_norm

    torch.manual_seed(0)
    clients = [{"a": torch.randn(3, 4) * scale, "b": torch.randn(5) * scale} for scale in (0.1, 10.0)]
    expected = []
    for grads in clients:
        params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads.values()]
        for p, g in zip(params, grads.values()):
            p.grad = g.clone()
        torch.nn.utils.clip_grad_norm_(params, max_norm=2.0)
        expected.append({k: p.grad for k, p in zip(grads, params)})
    stack = {k: torch.stack([c[k] for c in clients]) for k in clients[0]}
    for grads, want in zip(clients, expected):
        norm = torch.zeros(())
        before = torch.cat([g.flatten() for g in grads.values()]).norm().item()
        got = clip_by_total_norm({k: g.clone() for k, g in grads.items()}, 2.0, norm)
        assert norm.item() == pytest.approx(before)
        for k in grads:
            torch.testing.assert_close(got[k], want[k])
    got = clip_by_total_norm({k: s.clone() for k, s in stack.items()}, 2.0, torch.zeros(2))
    for i, want in enumerate(expected):
        for k in want:
            torch.testing.assert_close(got[k][i], want[k])
    assert torch.equal(got["a"][0], clients[0]["a"])  # the small client is not clipped


@pytest.mark.parametrize("start, first", [("zero", 0.1), ("gradient", 1.0)])
def test_dsgd_client_momentum_start(start, first):
    """Audit #9: ByzFL's convention (the FBN group's) starts the momentum at m₀ = 0, so the first
    message is (1 − β) g; ``momentum_start=gradient`` sends g. The second message is the EMA."""
    algo = build_algorithm(OmegaConf.create({"name": "dsgd", "lr": 0.1, "client_momentum": 0.9,
                                             "momentum_start": start, "weight_decay": 0.0, "momentum": 0.0,
                                             "momentum_carry": "none", "clip_grad_norm": None}))
    params = {"w": torch.zeros(3)}
    g1, g2 = torch.tensor([1.0, -2.0, 3.0]), torch.tensor([0.5, 0.5, 0.5])
    local = algo.start(params, {})
    algo.step(params, {"w": g1}, local, 0.1)
    upload, _, keep = algo.finish(params, local)
    torch.testing.assert_close(upload["w"], first * g1)
    local = algo.start(params, keep)
    algo.step(params, {"w": g2}, local, 0.1)
    upload, _, _ = algo.finish(params, local)
    torch.testing.assert_close(upload["w"], 0.9 * first * g1 + 0.1 * g2)
