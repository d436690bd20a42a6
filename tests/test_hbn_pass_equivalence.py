"""HBN's statistics pass (Eq. 7-8, 11; ``norms/hbn.py``: one forward for all clients, in chunks
that cut across them, paused before each layer) against the pass as first written
(``reference_pass``): for every stage, every client in turn loads what it received and the
statistics aggregated so far, runs all its samples through the whole network and records the
stage's layers by forward hooks. Float64 on ResNet-20 (19 layers, residual additions), for the
paper's pass (sequential stages, all data or ``stats_samples`` random draws), the one-stage
``global`` reading and the authors' code (``variant=code``: hybrid train-mode batch of the first
64 samples, mixed moments, per-client factors); directly, in the engine's training rounds and in
the evaluation's re-estimation (§4.1)."""
from __future__ import annotations

import pytest
import torch

from conftest import build_simulation, compose_config
from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.transforms import RoundInfo
from fedbn_bench.core.updates import LayerStatistics, State
from fedbn_bench.engine.sampling import STATISTICS_STREAM, generator
from fedbn_bench.engine.statistics_pass import statistics_pass
from fedbn_bench.models import build_model
from fedbn_bench.norms import build_norm

TOLERANCE = {"rtol": 1e-10, "atol": 1e-12}
CASES = {
    "paper": [],
    "paper_drawn": ["norm.stats_samples=24"],
    "global": ["norm.stats_forward=global"],
    "code": ["norm.variant=code"],
    "code_drawn": ["norm.variant=code", "norm.stats_samples=16", "norm.stats_draw=random"],
}


def recorded_inputs(model, layers: dict, x: torch.Tensor, hybrid: bool) -> dict[str, torch.Tensor]:
    """Every HBN layer's input (its first call) in a whole forward of ``x``, in call order: the
    model in eval mode, its HBN layers in training mode under the hybrid rule."""
    seen: dict[str, torch.Tensor] = {}
    handles = [layer.register_forward_pre_hook(lambda m, i, name=name: seen.setdefault(name, i[0]))
               for name, layer in layers.items()]
    was_training = model.training
    model.eval()
    for layer in layers.values():
        layer.train(hybrid)
    try:
        with torch.no_grad():
            model(x)
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    return seen


def reference_moments(norm, layer, x: torch.Tensor) -> LayerStatistics:
    """A layer's upload (Eq. 7): the biased moments of its input ``x``, or (``stats_record:
    mixed``) its Eq. 9 moments with the client's factor; counted in values or images."""
    var, mean = torch.var_mean(x, [0, 2, 3], correction=0)
    if norm.settings.stats_record == "mixed":
        w = torch.sigmoid(layer.hybrid_factor)
        mean, var = (1 - w) * mean + w * layer.global_mean, (1 - w) * var + w * layer.global_var
    count = x.numel() // x.shape[1] if norm.settings.count == "values" else len(x)
    return LayerStatistics(mean, var, torch.tensor(float(count), dtype=torch.float64))


def reference_pass(norm, model, load_client, inputs: list[torch.Tensor], info: RoundInfo, weights: torch.Tensor,
                   global_state: State) -> State:
    """The pass stage by stage, client by client, a whole forward each (see the module docstring)."""
    layers = norm.norm_modules(model)
    hybrid = norm.settings.stats_forward == "hybrid"
    xs = [norm.statistics_inputs(x, generator(info.seed, info.round_idx, c, STATISTICS_STREAM))
          for c, x in zip(info.clients, inputs)]
    load_client(0)
    order = list(recorded_inputs(model, layers, xs[0], hybrid))
    stages = [[name] for name in order] if norm.settings.stats_forward == "sequential" else [order]
    new: State = {}
    for stage in stages:
        stats = []
        for i, x in enumerate(xs):
            load_client(i)
            model.load_state_dict(new, strict=False)
            seen = recorded_inputs(model, layers, x, hybrid)
            stats.append({name: reference_moments(norm, layers[name], seen[name]) for name in stage})
        new.update(norm.aggregate_statistics(stats, weights, Aggregator(), {**global_state, **new}))
    return new


def assert_same_statistics(got: State, want: State) -> None:
    assert got.keys() == want.keys() and len(want) == 2 * 19
    for key in want:
        torch.testing.assert_close(got[key], want[key], **TOLERANCE, msg=key)


def client_states(norm, model, count: int) -> list[State]:
    """What each of ``count`` clients received: the model's random weights and global
    statistics, and a hybrid factor of its own."""
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0, 0.3, generator=g)
        for layer in norm.norm_modules(model).values():
            layer.global_mean.normal_(0, 0.5, generator=g)
            layer.global_var.uniform_(0.5, 2.0, generator=g)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    return [{**start, **{k: torch.randn(v.shape, generator=g, dtype=v.dtype) for k, v in start.items()
                         if k.endswith("hybrid_factor")}} for _ in range(count)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_pass_equals_the_reference_on_resnet20(case):
    """Client sizes 5, 17, 40 in chunks of 7 samples: every chunk boundary but one falls inside a
    client, and the first chunk holds two clients."""
    norm = build_norm(compose_config(["norm=hbn", "norm.lam=0.3", "norm.stats_batch_size=7", *CASES[case]]).norm)
    model = norm.prepare_model(build_model("resnet20", norm.norm_layer, (1, 8, 8), 10)).double()
    states = client_states(norm, model, 3)
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(n, 1, 8, 8, generator=g, dtype=torch.float64) * (1 + k) + k for k, n in enumerate((5, 17, 40))]
    info, weights = RoundInfo(3, 7, [4, 0, 2]), torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    global_state = {k: v.clone() for k, v in states[0].items()}
    load = lambda i: model.load_state_dict(states[i])  # noqa: E731
    want = reference_pass(norm, model, load, xs, info, weights, global_state)
    got = statistics_pass(norm, model, load, xs, info, weights, Aggregator(), global_state)
    assert_same_statistics(got, want)


@pytest.mark.parametrize("case", ["paper", "code_drawn"])
def test_engine_rounds_and_reestimation_equal_the_reference(case, tmp_path):
    """A training round's pass (the clients' broadcast, their own factors after a round) and the
    statistics re-estimated before a test (λ = 1, the global weights), as the engine runs them."""
    sim = build_simulation(["model=resnet20", "norm=hbn", "num_clients=12", "clients_per_round=3", "alpha=1.0",
                            "algo.local_steps=1", "norm.stats_batch_size=7", *CASES[case]], tmp_path, rounds=3)
    sim.run_round(0)
    rounds, store, norm, model = sim.rounds, sim.store, sim.fed.norm, sim.fed.model
    plan = rounds.plan(1)

    def reference(jobs) -> State:
        clients = [job.client for job in jobs]
        return reference_pass(norm, model, lambda i: rounds.backend.load(jobs[i]),
                              [sim.fed.data.train.x[job.indices] for job in jobs], RoundInfo(1, sim.s.seed, clients),
                              rounds.weights(clients), store.global_state)

    assert_same_statistics(plan.pass_statistics, reference(plan.jobs))
    with norm.fresh_statistics():
        want = reference(rounds.jobs(rounds.sample(1), broadcast=False))
    assert_same_statistics(rounds.fresh_statistics(1), want)
