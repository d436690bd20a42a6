"""HBN (hbn_hybrid_batch_normalisation.txt §3, Alg. 1): the statistics the server aggregates are
exactly those of the union of the clients' data under the global weights (App. A.2) and, with the
sequential pass, those the evaluated network sees; the λ smoothing of Eq. 11; the evaluation
protocol of §4.1; the hybrid rule of Eq. 9 and its per-client factor; the authors'-code variant
and the Table 6 switches.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from conftest import compose_config
from fedbn_bench import runner
from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.transforms import RoundInfo
from fedbn_bench.core.updates import Statistics
from fedbn_bench.engine.sampling import STATISTICS_STREAM, generator
from fedbn_bench.engine.simulation import Simulation
from fedbn_bench.engine.statistics_pass import statistics_pass
from fedbn_bench.errors import ConfigError
from fedbn_bench.models import build_model
from fedbn_bench.norms import build_norm
from fedbn_bench.norms.hbn import VARIANT_SETTINGS, HybridBatchNorm
from fedbn_bench.runner import run_experiment


def clone_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in state.items()}


def hbn(*overrides: str):
    return build_norm(compose_config(["norm=hbn", *overrides]).norm)


def hbn_model(norm, name: str = "simple_cnn", seed: int = 0) -> torch.nn.Module:
    """A float64 model with random weights and random (received) global statistics."""
    torch.manual_seed(seed)
    model = norm.prepare_model(build_model(name, norm.norm_layer, (1, 8, 8), 10)).double()
    with torch.no_grad():
        for layer in norm.norm_modules(model).values():
            layer.global_mean.normal_(0, 0.5)
            layer.global_var.uniform_(0.5, 2.0)
    return model


def client_data(sizes=(5, 17, 40), seed: int = 1) -> list[torch.Tensor]:
    """Clients with different input distributions (shifted and scaled)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, 1, 8, 8, generator=g, dtype=torch.float64) * (1 + k) + k for k, n in enumerate(sizes)]


def union_statistics(model, norm, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Mean and unbiased variance of every HBN layer's input over ``x``, under the model as it is
    evaluated (every HBN layer normalizing with the global statistics)."""
    inputs, handles = {}, []
    for name, layer in norm.norm_modules(model).items():
        handles.append(layer.register_forward_hook(lambda m, i, o, name=name: inputs.__setitem__(name, i[0])))
    model.eval()
    with torch.no_grad():
        model(x)
    for h in handles:
        h.remove()
    out = {}
    for name, value in inputs.items():
        dims = [0, *range(2, value.dim())]
        var, mean = torch.var_mean(value.double(), dims, correction=1)
        out[f"{name}.global_mean"], out[f"{name}.global_var"] = mean, var
    return out


def engine_statistics(model, norm, xs: list[torch.Tensor]) -> list[Statistics]:
    """Every layer recorded under the received state (no stage's aggregate loaded), each client
    starting from the global state: one upload per client."""
    state = clone_state(model.state_dict())
    xs = [norm.statistics_inputs(x, torch.Generator().manual_seed(0)) for x in xs]
    stages = []
    norm.pass_statistics(model, xs, lambda i: model.load_state_dict(state), stages.append)
    return [{name: s for stage in stages for name, s in stage[i].items()} for i in range(len(xs))]


def staged_pass(model, norm, xs: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    """The engine's statistics pass (stage by stage) over clients holding ``xs``."""
    state = clone_state(model.state_dict())
    sizes = torch.tensor([len(x) for x in xs], dtype=torch.float64)
    return statistics_pass(norm, model, lambda i: model.load_state_dict(state), xs,
                           RoundInfo(0, 0, list(range(len(xs)))), (sizes / sizes.sum()).float(), Aggregator(), state)


def aggregate(norm, stats: list[Statistics], weights: torch.Tensor, global_state) -> dict[str, torch.Tensor]:
    """The server's aggregation as the engine calls it (weighted-mean aggregator), with the
    global state the clients received (Eq. 11 smooths with its statistics)."""
    return norm.aggregate_statistics(stats, weights, Aggregator(), clone_state(global_state))


def as_global_keys(stats: Statistics) -> dict[str, torch.Tensor]:
    """A client's upload keyed like the global state it aggregates into."""
    out = {}
    for name, layer in stats.items():
        out[f"{name}.global_mean"], out[f"{name}.global_var"] = layer.mean, layer.var
    return out


# -- App. A.2: exactness of Eq. 7 + Eq. 8 --------------------------------------------------------
@pytest.mark.parametrize("model_name", ["simple_cnn", "fbn_cnn", "resnet20", "mlp"])
def test_aggregate_equals_the_union_statistics_of_every_layer(model_name):
    norm = hbn("norm.lam=1", "norm.stats_batch_size=7", "norm.stats_forward=global")  # chunking must not matter
    model = hbn_model(norm, model_name)
    xs = client_data()
    stats = engine_statistics(model, norm, xs)
    sizes = torch.tensor([len(x) for x in xs], dtype=torch.float64)
    agg = aggregate(norm, stats, (sizes / sizes.sum()).float(), model.state_dict())
    ref = union_statistics(model, norm, torch.cat(xs))
    assert len(ref) == 2 * len(norm.norm_modules(model)) > 2
    assert set(agg) == set(ref)
    for key in ref:
        torch.testing.assert_close(agg[key], ref[key], rtol=1e-10, atol=1e-12, msg=key)
    naive = torch.stack([as_global_keys(s)[next(iter(ref))] for s in stats]).mean(0)  # the test can fail: a naive mean is off
    assert not torch.allclose(naive, ref[next(iter(ref))], rtol=1e-3)


@pytest.mark.parametrize("model_name", ["resnet20", "fbn_cnn", "simple_cnn"])
def test_sequential_pass_gives_the_evaluated_network_its_own_statistics(model_name):
    """The default pass (audit #1): after it (λ = 1), the network evaluated with the new statistics
    sees at every layer exactly the union statistics it normalizes with. The one-pass reading
    (``stats_forward: global``) does not on a deep model."""
    xs = client_data()
    for forward in ("sequential", "global"):
        norm = hbn("norm.lam=1", "norm.stats_batch_size=7", f"norm.stats_forward={forward}")
        model = hbn_model(norm, model_name)
        new = staged_pass(model, norm, xs)
        model.load_state_dict(new, strict=False)
        seen = union_statistics(model, norm, torch.cat(xs))
        assert set(new) == set(seen) and len(seen) == 2 * len(norm.norm_modules(model))
        if forward == "sequential":
            for key in seen:
                torch.testing.assert_close(new[key], seen[key], rtol=1e-9, atol=1e-11, msg=key)
        else:
            assert max((new[k] - seen[k]).abs().max().item() for k in seen) > 1e-3


def test_aggregation_ignores_the_algorithm_weights_and_uses_the_counts():
    norm = hbn("norm.lam=1")
    model = hbn_model(norm)
    stats = engine_statistics(model, norm, client_data())
    uniform = aggregate(norm, stats, torch.full((3,), 1 / 3), model.state_dict())
    skewed = aggregate(norm, stats, torch.tensor([0.8, 0.1, 0.1]), model.state_dict())
    for key in uniform:
        torch.testing.assert_close(uniform[key], skewed[key], rtol=0, atol=0)


def test_eq11_smoothing_with_the_received_statistics():
    lam = 0.25
    smooth, exact = hbn(f"norm.lam={lam}"), hbn("norm.lam=1")
    model = hbn_model(exact)
    stats = engine_statistics(model, exact, client_data())
    w = torch.full((3,), 1 / 3)
    old = model.state_dict()  # the statistics the clients received, held by the server
    new = aggregate(exact, stats, w, old)
    got = aggregate(smooth, stats, w, old)
    for key in new:
        torch.testing.assert_close(got[key], (1 - lam) * old[key] + lam * new[key], rtol=1e-12, atol=1e-12)
    with smooth.fresh_statistics():  # Alg. 1's statistics round t = T + 1 and §4.1's re-estimation
        final = aggregate(smooth, stats, w, old)
    for key in new:
        torch.testing.assert_close(final[key], new[key], rtol=0, atol=0)
    assert not torch.equal(aggregate(smooth, stats, w, old)[key], new[key])


def test_statistics_pass_has_no_side_effects():
    norm = hbn()
    model = hbn_model(norm, "fbn_cnn")
    model.train()
    before = clone_state(model.state_dict())
    stages = []
    norm.pass_statistics(model, [client_data()[2]], lambda i: None, stages.append)
    assert [list(stage[0]) for stage in stages] == [[name] for name in norm.norm_modules(model)]
    assert model.training and all(m.training for m in model.modules())
    assert all(p.grad is None for p in model.parameters())
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key


class Spy(Simulation):
    """The engine, recording the global state before and after every round (training rounds and
    the statistics round, both run by the simulation's ``RoundRunner``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.before, self.after = {}, {}
        Spy.last = self
        rounds = self.rounds
        for name in ("run_round", "statistics_round"):
            setattr(rounds, name, self.recording(getattr(rounds, name)))

    def recording(self, round_fn):
        def wrapper(round_idx):
            self.before[round_idx] = clone_state(self.store.global_state)
            out = round_fn(round_idx)
            self.after[round_idx] = clone_state(self.store.global_state)
            return out

        return wrapper


def run_spy(monkeypatch, tmp_path, *overrides: str) -> Spy:
    monkeypatch.setattr(runner, "Simulation", Spy)
    summary = run_experiment(compose_config(list(overrides)), tmp_path)
    assert summary["status"] == "completed"
    return Spy.last


@pytest.mark.parametrize("forward", ["global", "sequential"])
def test_engine_rounds_aggregate_the_union_statistics(monkeypatch, tmp_path, forward):
    """Through the real engine. ``global``: round t smooths (λ = 0.01) the union statistics under
    the weights received in round t. Both: the final statistics round (Alg. 1, t = T + 1) sets
    them exactly; with the sequential pass they are those the final network sees."""
    sim = run_spy(monkeypatch, tmp_path, "norm=hbn", "model=simple_cnn", "num_clients=6", "clients_per_round=3",
                  "rounds=2", "algo.local_steps=2", "eval_every=1", f"norm.stats_forward={forward}")
    fed, norm, lam = sim.fed, sim.fed.norm, sim.fed.norm.settings.lam
    assert sorted(sim.before) == [0, 1, 2]  # rounds 0, 1 and the statistics round 2
    for r in (0, 2) if forward == "global" else (2,):
        clients = sim.rounds.sample(r)
        x = torch.cat([fed.data.train.x[fed.clients[c].indices] for c in clients])
        fed.model.load_state_dict(sim.before[r] if forward == "global" else sim.after[r])
        ref = union_statistics(fed.model, norm, x)
        weight = lam if r == 0 else 1.0
        for key, value in ref.items():
            expected = (1 - weight) * sim.before[r][key].double() + weight * value
            torch.testing.assert_close(sim.after[r][key].double(), expected, rtol=1e-5, atol=1e-6, msg=key)
    untouched = [k for k in sim.after[2] if not k.endswith(("global_mean", "global_var"))]
    assert all(torch.equal(sim.after[2][k], sim.before[2][k]) for k in untouched)  # no weight update at T + 1


@pytest.mark.parametrize("option", ["auto", "stored"])
def test_evaluation_reestimates_the_statistics_on_the_rounds_clients(monkeypatch, tmp_path, option):
    """HBN §4.1 (and its code): before each test the statistics are re-estimated with λ = 1 on
    the round's sampled clients under the new weights; the stored (smoothed) ones stay. The last
    evaluation follows the statistics round, whose statistics are fresh already."""
    evaluated = []
    original = Spy.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        evaluate = self.evaluator.evaluate

        def spy(state=None, **options):
            evaluated.append((clone_state(self.store.global_state), state and clone_state(state)))
            return evaluate(state, **options)

        monkeypatch.setattr(self.evaluator, "evaluate", spy)

    monkeypatch.setattr(Spy, "__init__", init)
    sim = run_spy(monkeypatch, tmp_path, "norm=hbn", "model=simple_cnn", "num_clients=6", "clients_per_round=3",
                  "rounds=3", "algo.local_steps=2", "eval_every=1", f"eval_statistics={option}")
    fed, norm = sim.fed, sim.fed.norm
    assert len(evaluated) == 3 and evaluated[-1][1] is None
    if option == "stored":
        assert all(state is None for _, state in evaluated)
        return
    for r, (stored, state) in enumerate(evaluated[:-1]):
        assert all(torch.equal(state[k], stored[k]) for k in stored if not k.endswith(("global_mean", "global_var")))
        x = torch.cat([fed.data.train.x[fed.clients[c].indices] for c in sim.rounds.sample(r)])
        fed.model.load_state_dict(state)
        for key, value in union_statistics(fed.model, norm, x).items():
            torch.testing.assert_close(state[key].double(), value, rtol=1e-5, atol=1e-6, msg=key)
            assert not torch.allclose(stored[key].double(), value, rtol=1e-2)  # the stored ones are smoothed


def test_reestimation_needs_a_statistics_pass(tmp_path):
    with pytest.raises(ConfigError, match="eval_statistics"):
        run_experiment(compose_config(["norm=bn", "eval_statistics=reestimate", "rounds=1"]), tmp_path)


# -- Eq. 9: the hybrid rule and its factor -------------------------------------------------------
def manual_norm(x, mean, var, layer):
    shape = (1, -1, 1, 1)
    y = (x - mean.view(shape)) / torch.sqrt(var.view(shape) + layer.eps)
    return y * layer.weight.view(shape) + layer.bias.view(shape)


def random_layer(mixing: str = "learned") -> HybridBatchNorm:
    torch.manual_seed(3)
    layer = HybridBatchNorm(4, mixing=mixing).double()
    with torch.no_grad():
        layer.global_mean.normal_()
        layer.global_var.uniform_(0.5, 2)
        layer.weight.normal_()
        layer.bias.normal_()
    return layer


def test_hybrid_factor_starts_at_an_equal_mix():
    layer = random_layer()
    x = torch.randn(6, 4, 3, 3, dtype=torch.float64) * 2 + 1
    zeros = torch.zeros(4, dtype=torch.float64)
    assert torch.equal(layer.hybrid_factor, zeros) and torch.equal(layer.global_weight(), zeros + 0.5)
    var_b, mean_b = torch.var_mean(x, (0, 2, 3), correction=0)
    expected = manual_norm(x, 0.5 * mean_b + 0.5 * layer.global_mean, 0.5 * var_b + 0.5 * layer.global_var, layer)
    torch.testing.assert_close(layer.train()(x), expected)
    torch.testing.assert_close(random_layer("fixed").train()(x), expected)


def test_learned_factor_weights_the_global_statistics_by_its_sigmoid():
    layer = random_layer()
    with torch.no_grad():
        layer.hybrid_factor.copy_(torch.tensor([-3.0, -0.5, 0.5, 3.0]))
    x = torch.randn(6, 4, 3, 3, dtype=torch.float64)
    w = torch.sigmoid(layer.hybrid_factor.detach())
    var_b, mean_b = torch.var_mean(x, (0, 2, 3), correction=0)
    expected = manual_norm(x, (1 - w) * mean_b + w * layer.global_mean, (1 - w) * var_b + w * layer.global_var, layer)
    out = layer.train()(x)
    torch.testing.assert_close(out, expected)
    out.square().sum().backward()
    assert layer.hybrid_factor.grad is not None and layer.hybrid_factor.grad.abs().min() > 0


def test_mixing_ablations_and_evaluation_rule():
    x = torch.randn(6, 4, 3, 3, dtype=torch.float64)
    glob = random_layer("global_only")
    evaluated = manual_norm(x, glob.global_mean, glob.global_var, glob)
    torch.testing.assert_close(glob.train()(x), evaluated)
    batch = random_layer("batch_only")
    expected = F.batch_norm(x, None, None, batch.weight, batch.bias, True, 0.0, batch.eps)
    torch.testing.assert_close(batch.train()(x), expected)
    learned = random_layer()
    with torch.no_grad():
        learned.hybrid_factor.normal_()
    torch.testing.assert_close(learned.eval()(x), evaluated)  # evaluation: global statistics, no factor
    assert glob.hybrid_factor is None and batch.hybrid_factor is None


def test_hybrid_factor_stays_on_each_client_and_is_never_communicated(monkeypatch, tmp_path):
    seen = []
    original = Spy.__init__

    def init(self, *args, **kwargs):
        """Every upload the server receives (``ClientUpdate``: weights, extras, statistics) and
        every entry it computes, for the whole run (training rounds and the statistics round)."""
        original(self, *args, **kwargs)
        update, aggregate_statistics = self.fed.algo.server_update, self.fed.norm.aggregate_statistics

        def spy_update(global_state, updates, weights, aggregator, lr):
            out = update(global_state, updates, weights, aggregator, lr)
            seen.extend([*(k for u in updates for k in u.weights),
                         *(k for u in updates for extra in u.extras.values() for k in extra),
                         *(k for u in updates for name, s in u.statistics.items() for k in (name, *s.meta)), *out])
            return out

        def spy_aggregate(stats, weights, aggregator, global_state):
            out = aggregate_statistics(stats, weights, aggregator, global_state)
            seen.extend([*(k for s in stats for name, layer in s.items() for k in (name, *layer.meta)), *out])
            return out

        monkeypatch.setattr(self.fed.algo, "server_update", spy_update)
        monkeypatch.setattr(self.fed.norm, "aggregate_statistics", spy_aggregate)

    monkeypatch.setattr(Spy, "__init__", init)
    sim = run_spy(monkeypatch, tmp_path, "norm=hbn", "model=simple_cnn", "num_clients=4", "rounds=2",
                  "algo.local_steps=3", "eval_every=1")
    store = sim.store
    factors = [k for k in store.global_state if k.endswith("hybrid_factor")]
    assert factors and store.local_keys == factors and not sim.personalized
    assert seen and not any(k.endswith("hybrid_factor") for k in seen)
    assert all(torch.equal(store.global_state[k], torch.zeros_like(store.global_state[k])) for k in factors)
    local = [torch.cat([store.client_local[c][k] for k in factors]) for c in range(4)]
    assert all(v.abs().max() > 0 for v in local)
    assert not torch.equal(local[0], local[1])


# -- Paper-vs-code and Table 6 options ---------------------------------------------------------
def test_statistics_samples_are_drawn_at_random_per_round_and_client_or_taken_first():
    """§5: Eq. 7 on "128 randomly sampled images" per client (``stats_samples``); the authors'
    code takes the first ones (``stats_draw: first``); all data when there are no more."""
    x = torch.arange(40.0).view(40, 1)
    drawn = hbn("norm.stats_samples=16").statistics_inputs(x, torch.Generator().manual_seed(3))
    expected = torch.randperm(40, generator=torch.Generator().manual_seed(3))[:16]
    assert torch.equal(drawn, x[expected]) and len(set(drawn.flatten().tolist())) == 16
    assert not torch.equal(drawn, x[:16])
    other = hbn("norm.stats_samples=16").statistics_inputs(x, torch.Generator().manual_seed(4))
    assert not torch.equal(drawn, other)
    first = hbn("norm.stats_samples=16", "norm.stats_draw=first")
    assert torch.equal(first.statistics_inputs(x, torch.Generator().manual_seed(3)), x[:16])
    assert hbn("norm.variant=code").settings.stats_draw == "first"
    for options in ([], ["norm.stats_samples=40"], ["norm.stats_samples=64"]):
        assert hbn(*options).statistics_inputs(x, torch.Generator()) is x


def test_engine_pass_reads_each_clients_draw_of_its_round():
    """The engine's pass (λ = 1, one client) gives the union statistics of exactly the samples
    drawn with ``(seed, round, client, STATISTICS_STREAM)``."""
    norm = hbn("norm.lam=1", "norm.stats_samples=12")
    model = hbn_model(norm)
    x = client_data((30,))[0]
    state = clone_state(model.state_dict())
    grad_modes = []
    for layer in norm.norm_modules(model).values():
        layer.register_forward_hook(lambda m, i, o: grad_modes.append(torch.is_grad_enabled()))
    new = statistics_pass(norm, model, lambda i: model.load_state_dict(state), [x], RoundInfo(5, 9, [2]),
                          torch.ones(1), Aggregator(), state)
    assert grad_modes and not any(grad_modes)  # the pass records no autograd graph
    pick = torch.randperm(30, generator=generator(9, 5, 2, STATISTICS_STREAM))[:12]
    model.load_state_dict(new, strict=False)
    seen = union_statistics(model, norm, x[pick])
    for key in seen:
        torch.testing.assert_close(new[key], seen[key], rtol=1e-9, atol=1e-11, msg=key)


def test_code_variant_settings_and_overrides():
    assert hbn().settings == VARIANT_SETTINGS["paper"]
    assert hbn("norm.variant=code").settings == VARIANT_SETTINGS["code"]
    assert VARIANT_SETTINGS["code"].lam == 0.002 and VARIANT_SETTINGS["paper"].lam == 0.01
    assert hbn("norm.variant=code", "norm.lam=0.5").settings.lam == 0.5  # a set key wins over the variant


def test_code_variant_uploads_the_mixed_moments_of_the_first_64_samples():
    """The authors' ``buffer_update``: one train-mode batch of the client's first 64 samples;
    each layer records its Eq. 9 moments ``(1 - w) mu_b + w mu_g`` (biased variance), counted in
    images; Eq. 8 over one client then divides the variance by N - 1 with N = 64 images."""
    norm = hbn("norm.variant=code", "norm.lam=1")
    model = hbn_model(norm, "simple_cnn")
    with torch.no_grad():
        for layer in norm.norm_modules(model).values():
            layer.hybrid_factor.normal_()
    x = client_data((100,))[0]
    stats = engine_statistics(model, norm, [x])[0]
    agg = aggregate(norm, [stats], torch.ones(1), model.state_dict())
    inputs = {}
    for name, layer in norm.norm_modules(model).items():
        layer.register_forward_hook(lambda m, i, o, name=name: inputs.__setitem__(name, i[0]))
    with torch.no_grad():
        model.train()(x[:64])
    for name, layer in norm.norm_modules(model).items():
        w = torch.sigmoid(layer.hybrid_factor.detach())
        var_b, mean_b = torch.var_mean(inputs[name], (0, 2, 3), correction=0)
        mean, var = (1 - w) * mean_b + w * layer.global_mean, (1 - w) * var_b + w * layer.global_var
        assert stats[name].count.item() == 64
        torch.testing.assert_close(stats[name].mean, mean)
        torch.testing.assert_close(stats[name].var, var)
        torch.testing.assert_close(agg[f"{name}.global_mean"], mean)
        torch.testing.assert_close(agg[f"{name}.global_var"], var * 64 / 63)


def test_code_variant_averages_the_factor_and_new_clients_start_from_the_average(monkeypatch, tmp_path):
    """HybridBN's server averages ``distribution_factor`` with the weights; a client keeps its own
    after training and, before its first round, starts from the server's average."""
    starts = {}
    original = Spy.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        jobs = self.rounds.jobs

        def spy(clients, **kwargs):
            out = jobs(clients, **kwargs)
            for job in out:
                starts.setdefault(job.client, []).append({k: v.clone() for k, v in job.local.items()})
            return out

        monkeypatch.setattr(self.rounds, "jobs", spy)

    monkeypatch.setattr(Spy, "__init__", init)
    sim = run_spy(monkeypatch, tmp_path, "norm=hbn", "norm.variant=code", "model=simple_cnn", "num_clients=6",
                  "clients_per_round=2", "rounds=3", "algo.local_steps=2", "eval_every=1")
    store = sim.store
    factors = [k for k in store.global_state if k.endswith("hybrid_factor")]
    assert factors and store.local_keys == factors
    assert all(store.global_state[k].abs().max() > 0 for k in factors)  # averaged, no longer 0
    trained = [c for c in range(6) if store.client_local[c]]
    never = [c for c in range(6) if not store.client_local[c]]
    assert trained and never  # 2 per round over 3 rounds: some clients never trained
    assert any(starts[c][0] == {} for c in starts)  # a first participation starts from the global value
    for c in trained:
        assert not all(torch.equal(store.client_local[c][k], store.global_state[k]) for k in factors)


def test_weighted_average_ablation():
    norm = hbn("norm.lam=1", "norm.aggregation=weighted_average")
    model = hbn_model(norm)
    stats = engine_statistics(model, norm, client_data())
    w = torch.tensor([0.5, 0.3, 0.2])
    agg = aggregate(norm, stats, w, model.state_dict())
    assert set(agg) == set(as_global_keys(stats[0]))
    for key in agg:
        expected = sum(wk * as_global_keys(s)[key].double() for wk, s in zip(w.double(), stats))
        torch.testing.assert_close(agg[key], expected)


def test_moving_average_ablation_uploads_running_statistics_after_training():
    norm = hbn("norm.stats_source=moving_average", "norm.ma_momentum=0.5")
    assert not norm.final_statistics_round
    model = hbn_model(norm)
    x = client_data((20,))[0]
    model.load_state_dict(model.state_dict())  # receiving the global statistics restarts the averages
    first = next(iter(norm.norm_modules(model).items()))
    name, layer = first
    torch.testing.assert_close(layer.running_mean, layer.global_mean)  # starts from the received ones
    captured = []
    layer.register_forward_hook(lambda m, i, o: captured.append(i[0]))
    with torch.no_grad():
        model.train()(x[:10])  # one local step's forward
    var, mean = torch.var_mean(captured[0], (0, 2, 3), correction=0)  # biased, as Eq. 8 expects
    stats = norm.client_statistics(model, len(x))
    torch.testing.assert_close(stats[name].mean, 0.5 * layer.global_mean + 0.5 * mean)
    torch.testing.assert_close(stats[name].var, 0.5 * layer.global_var + 0.5 * var)
    assert stats[name].count.item() == 20 * 64  # samples x 8x8 positions


@pytest.mark.parametrize(
    "option", ["mixing=batch_only", "mixing=global_only", "mixing=fixed", "stats_source=moving_average",
               "aggregation=weighted_average", "stats_forward=hybrid", "stats_samples=64", "stats_samples=8", "stats_forward=global",
               "variant=code", "count=images"],
)
def test_every_option_runs_end_to_end(tmp_path, option):
    summary = run_experiment(compose_config(["norm=hbn", f"norm.{option}", "model=simple_cnn", "num_clients=4",
                                             "rounds=2", "algo.local_steps=2", "eval_every=1"]), tmp_path)
    assert summary["status"] == "completed" and math.isfinite(summary["final_test_loss"])


@pytest.mark.parametrize(
    "option, key",
    [("lam=0", "norm.lam"), ("lam=1.5", "norm.lam"), ("mixing=half", "norm.mixing"),
     ("stats_source=ema", "norm.stats_source"), ("aggregation=mean", "norm.aggregation"),
     ("stats_forward=train", "norm.stats_forward"), ("stats_samples=-1", "norm.stats_samples"),
     ("stats_batch_size=0", "norm.stats_batch_size"), ("ma_momentum=0", "norm.ma_momentum"),
     ("variant=authors", "norm.variant"), ("stats_record=mixed", "norm.stats_record"), ("count=pixels", "norm.count"),
     ("factor_start=one", "norm.factor_start"),
     ("stats_draw=last", "norm.stats_draw")],
)
def test_invalid_options_name_the_key(option, key):
    with pytest.raises(ConfigError, match=key):
        hbn(f"norm.{option}")


def test_reestimation_uses_the_global_weights_not_a_look_ahead_broadcast(monkeypatch, tmp_path):
    """FedACG broadcasts a look-ahead model; statistics re-estimated for testing (and at T + 1)
    belong to the global weights that are evaluated, so they never go through ``broadcast``."""
    sim = run_spy(monkeypatch, tmp_path, "norm=hbn", "algo=fedacg", "model=simple_cnn", "num_clients=4",
                  "rounds=1", "algo.local_steps=2")

    def no_broadcast(global_state, client):
        raise AssertionError("re-estimation went through algo.broadcast")

    monkeypatch.setattr(sim.fed.algo, "broadcast", no_broadcast)
    assert sim.rounds.fresh_statistics(0)
