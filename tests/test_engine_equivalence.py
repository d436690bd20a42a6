"""``engine=vmap`` and ``engine=packed`` against the reference ``engine=loop``: same sampling, same
batches, same weights, statistics and per-client state after 3 rounds, with unequal client sizes
(Dirichlet label skew, so clients take different numbers of local steps), for every norm method and
every algorithm, none of them falling back; and the choice of ``engine=auto``.

Each comparison runs in float64, where the two engines agree to 1e-9: there the only difference left
is rounding, so any error in masking, ordering, statistics or optimizer arithmetic would show up by many
orders of magnitude. In float32 the engines' rounding differs with the CPU's kernels (vector width,
summation order), so no fixed tolerance holds on every x86 CPU; the float32 check is relative to the
computation's own conditioning instead (``assert_float32_equivalent``).
"""
from __future__ import annotations

import json
import logging
from typing import Callable

import pytest
import torch

from conftest import build_simulation, compose_config
from fedbn_bench.engine.backends.stacked import StackedBackend
from fedbn_bench.engine import select
from fedbn_bench.engine.select import choose_engine, select_engine
from fedbn_bench.engine.simulation import Simulation
from fedbn_bench.norms import NORMS
from fedbn_bench.records.run_records import summary_line
from fedbn_bench.runner import build_federation, run_experiment

ROUNDS = 3
BASE = ["model=simple_cnn", "num_clients=10", "clients_per_round=3", "batch_size=32", "alpha=0.3", "lr=0.05"]


def simulate(engine: str, overrides: list[str], tmp_path, dtype=torch.float64, simulation=Simulation,
             **options) -> tuple[Simulation, list[torch.Tensor]]:
    sim = build_simulation([*BASE, *overrides], tmp_path / engine, ROUNDS, dtype, engine, simulation, **options)
    losses = [sim.run_round(r) for r in range(ROUNDS)]
    return sim, losses


TOLERANCE = {torch.float32: {"rtol": 1e-4, "atol": 1e-5}, torch.float64: {"rtol": 1e-9, "atol": 1e-11}}
FLOAT32_ERROR_FACTOR = 16.0
"""How much larger a stacked engine's float32 error (against the float64 loop) may be than the float32
loop's own error. Both are float32 rounding carried through the same 3 rounds, so they are of one size
whatever the CPU: the largest ratio measured over every norm on both engines was 5.6 (AMD EPYC, torch
2.14), and an error of logic is orders of magnitude larger (see the module docstring)."""
FLOAT32_SEEDS = (0, 1, 2)
"""The seeds a float32 case is compared on until one is within its bounds. No rounding bound covers a discrete
event: a max-pooling near-tie (or a ReLU input at 0) that float32 rounding resolves one way in the engine and the
other in the loop sends a gradient to another position. Every run here meets near-ties (windows whose two largest
values lie within 64 float32 ulps: 1 to 6 per run for bn, fbn, gn, hbn, fixbn), almost all without visible
effect; fbn's in round 3 (channel 9 of features.4: 0.44820630 against 0.44820595 in float64, the other order in
float32) changes that channel's gradient by 7 %, and on the H200 machine's CPU (torch 2.11,
results/bench/gpu_check.log) the loop went the float64 way and the engines did not. Such an event depends on the
data and weights a seed draws, an error of logic does not: a case fails only when every seed is over its bounds,
so a chance event of probability p fails it with p³ while a logic error fails it always."""
FLOAT32_FLOOR_ULPS = 64
"""A tensor whose float32 loop error happens to be tiny still allows this many float32 units of its
largest entry (summation order alone moves a result by a few)."""


def assert_same_state(a: dict, b: dict, what: str, tol: dict) -> None:
    assert a.keys() == b.keys(), what
    for key in a:
        if isinstance(a[key], dict):
            assert_same_state(a[key], b[key], f"{what}.{key}", tol)
        else:
            torch.testing.assert_close(b[key], a[key], **tol, msg=f"{what}: {key}")


def assert_equivalent(overrides: list[str], tmp_path, dtype=torch.float64, tol=None, engine="vmap",
                      simulation=Simulation) -> Simulation:
    tol = tol or TOLERANCE[dtype]
    loop, loop_losses = simulate("loop", overrides, tmp_path, dtype, simulation)
    vmap, vmap_losses = simulate(engine, overrides, tmp_path, dtype, simulation)
    assert isinstance(vmap.backend, StackedBackend), f"engine={engine} is not a stacked backend"
    steps = {loop.fed.algo.num_steps(r.size, loop.rounds.batch_size) for r in loop.store.records}
    assert len(steps) > 1 or "algo=dsgd" in overrides or "algo=centralized" in overrides, "unequal steps wanted"
    assert loop.rounds.samples_seen == vmap.rounds.samples_seen > 0
    assert_same_state(loop.store.global_state, vmap.store.global_state, "global", tol)
    for c, (a, b) in enumerate(zip(loop.store.client_local, vmap.store.client_local)):
        assert_same_state(a, b, f"client {c} local", tol)
    for c, (a, b) in enumerate(zip(loop.store.client_algo_state, vmap.store.client_algo_state)):
        assert_same_state(a, b, f"client {c} algo state", tol)
    torch.testing.assert_close(torch.stack(vmap_losses), torch.stack(loop_losses), **tol)
    return loop


def float_leaves(state: dict, prefix: str = "") -> dict[str, torch.Tensor]:
    """The floating-point tensors of a nested state, by dotted key, in float64."""
    leaves = {}
    for key, value in state.items():
        if isinstance(value, dict):
            leaves.update(float_leaves(value, f"{prefix}{key}."))
        elif value.is_floating_point():
            leaves[prefix + key] = value.double()
    return leaves


def sim_state(sim: Simulation) -> dict[str, torch.Tensor]:
    """Global state, every client's local and algorithm state, as float64 leaves."""
    store = sim.store
    return float_leaves({"global": store.global_state, "local": dict(enumerate(store.client_local)),
                         "algo": dict(enumerate(store.client_algo_state))})


def float32_excess(overrides: list[str], tmp_path, engine: str) -> tuple[Simulation, list[str]]:
    """``engine`` in float32 against the float32 loop, both measured from the float64 loop: per tensor the
    engine's largest error may be ``FLOAT32_ERROR_FACTOR`` times the loop's own float32 error (the
    conditioning of that tensor's computation), or ``FLOAT32_FLOOR_ULPS`` float32 units of its largest
    entry, whichever is larger. Returns the float32 loop and a line per tensor over its bound."""
    reference, _ = simulate("loop", overrides, tmp_path / "f64", torch.float64)
    loop, _ = simulate("loop", overrides, tmp_path / "f32", torch.float32)
    stacked, _ = simulate(engine, overrides, tmp_path / "f32", torch.float32)
    assert isinstance(stacked.backend, StackedBackend), f"engine={engine} is not a stacked backend"
    assert loop.rounds.samples_seen == stacked.rounds.samples_seen > 0
    exact, own, theirs = sim_state(reference), sim_state(loop), sim_state(stacked)
    assert exact.keys() == own.keys() == theirs.keys()
    eps = torch.finfo(torch.float32).eps
    over = []
    for key, value in exact.items():
        loop_error = (own[key] - value).abs().max().item()
        engine_error = (theirs[key] - value).abs().max().item()
        bound = max(FLOAT32_ERROR_FACTOR * loop_error, FLOAT32_FLOOR_ULPS * eps * value.abs().max().item())
        if engine_error > bound:
            where = int((theirs[key] - value).abs().argmax()) // value[0].numel() if value.dim() else 0
            over.append(f"{key}: engine={engine} float32 error {engine_error:.3g} against float64 (largest in "
                        f"row {where} of {len(value) if value.dim() else 1}), the float32 loop's {loop_error:.3g} "
                        f"(bound {bound:.3g})")
    return loop, over


def assert_float32_equivalent(overrides: list[str], tmp_path, engine: str,
                              excess: Callable[..., tuple[Simulation, list[str]]] = float32_excess
                              ) -> tuple[Simulation, list[str]]:
    """``float32_excess`` on the first of ``FLOAT32_SEEDS``, and on the next while a tensor is over its bound:
    fails when every seed is (a discrete rounding event is a seed's chance, a logic error every seed's).
    Returns the float32 loop of the seed within its bounds and that seed's overrides."""
    report = []
    for seed in FLOAT32_SEEDS:
        seeded = [*overrides, f"seed={seed}"]
        loop, over = excess(seeded, tmp_path / f"seed{seed}", engine)
        if not over:
            return loop, seeded
        report += [f"seed {seed}:", *over]
    raise AssertionError("over the float32 bounds on every seed:\n" + "\n".join(report))


def test_a_float32_case_fails_only_when_every_seed_is_over(tmp_path):
    """A chance event on one seed is forgiven by the next; a case over on every seed fails, naming each."""
    seen = []

    def over_on(bad: set):
        def excess(overrides, path, engine):
            seed = int(overrides[-1].removeprefix("seed="))
            seen.append(seed)
            return f"loop {seed}", [f"t{seed} over"] if seed in bad else []
        return excess

    assert assert_float32_equivalent([], tmp_path, "vmap", over_on({0})) == ("loop 1", ["seed=1"]) and seen == [0, 1]
    seen.clear()
    assert assert_float32_equivalent([], tmp_path, "vmap", over_on(set())) == ("loop 0", ["seed=0"]) and seen == [0]
    with pytest.raises(AssertionError, match="(?s)seed 0:.t0 over.seed 1:.t1 over.seed 2:.t2 over"):
        assert_float32_equivalent([], tmp_path, "vmap", over_on({0, 1, 2}))


def differs_from_start(sim: Simulation, overrides: list[str]) -> bool:
    """The run actually trained (guards against comparing two untouched models)."""
    cfg = compose_config([*BASE, *overrides])
    torch.manual_seed(cfg.seed)
    fed, _ = build_federation(cfg, torch.device("cpu"))
    start = fed.model.state_dict()
    return any(not torch.equal(start[k].to(v.dtype), v) for k, v in sim.store.global_state.items() if v.is_floating_point())


NORM_CASES = {
    "bn": [], "gn": [], "ln": [], "in": [], "none": [], "fedbn": [], "fedfn": [],
    "fixbn": ["norm.freeze_fraction=0.5", "norm.freeze_affine=true"],
    "hbn": [],
    "fbn": [],
    "dbn": ["adversarial=pgd_at", "adversarial.steps=1", "adversarial.random_start=false"],
    "fedrbn": ["adversarial=pgd_at", "adversarial.steps=1", "adversarial.random_start=false",
               "adversarial.at_fraction=0.5"],
}


@pytest.mark.parametrize("engine", ["vmap", "packed"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("norm", sorted(NORMS.names()))
def test_every_norm_is_equivalent_without_fallback(norm, dtype, engine, tmp_path, caplog):
    overrides = [f"norm={norm}", *NORM_CASES.get(norm, [])]
    cfg = compose_config([*BASE, *overrides])
    fed, _ = build_federation(cfg, torch.device("cpu"))
    with caplog.at_level(logging.WARNING, logger="fedbn_bench"):
        assert select_engine(engine, fed, cfg.batch_size, cfg.clients_per_round, torch.device("cpu")) == engine
    assert not caplog.records
    if dtype == torch.float32:
        sim, overrides = assert_float32_equivalent(overrides, tmp_path, engine)
    else:
        sim = assert_equivalent(overrides, tmp_path, dtype, engine=engine)
    assert differs_from_start(sim, overrides)


def test_every_norm_runs_on_every_backend():
    assert {n: NORMS.get(n).unsupported_backends for n in NORMS.names() if NORMS.get(n).unsupported_backends} == {}


@pytest.mark.parametrize("engine", ["vmap", "packed"])
def test_a_norm_without_a_backend_falls_back_to_loop_with_its_reason(engine, caplog, monkeypatch):
    reason = "its layers read a Python counter (a norm declaring what it cannot run)"
    monkeypatch.setattr(NORMS.get("bn"), "unsupported_backends", {engine: reason})
    cfg = compose_config([*BASE, "norm=bn"])
    fed, _ = build_federation(cfg, torch.device("cpu"))
    with caplog.at_level(logging.WARNING, logger="fedbn_bench"):
        assert select_engine(engine, fed, cfg.batch_size, cfg.clients_per_round, torch.device("cpu")) == "loop"
    assert reason in caplog.text


@pytest.mark.parametrize("overrides", [
    ["algo=dsgd", "algo.client_momentum=0.9", "algo.weight_decay=1e-3"],
    ["algo=fedavg", "algo.momentum_carry=local"],
    ["algo=fedavg", "algo.momentum_carry=global"],
    ["algo=fedavg", "algo.momentum=0", "algo.weight_decay=0", "algo.local_epochs=2"],
    ["algo=local"],
    ["algo=scaffold"],
    ["algo=scaffold", "norm=fedbn"],
    ["algo=centralized", "algo.local_steps=3", "algo.union_draw=uniform"],
    ["algo=centralized", "algo.local_steps=3", "clients_per_round=10", "partition=iid", "batch_size=8"],
    ["norm=fedbn", "algo=dsgd"],
    ["norm=fbn", "algo=dsgd"],
    ["norm=fbn", "algo=fedavg", "norm.multistep_correction=paper"],
    ["norm=hbn", "algo=fedavg", "algo.momentum_carry=local"],
    ["norm=fbn", "norm.variant=hbn_code"],
    ["norm=hbn", "norm.variant=code"],
    ["algo=fedavg", "algo.clip_grad_norm=0.5"],
    ["algo=fedprox", "algo.mu=0.1"],
    ["algo=fedprox", "algo.mu=0.1", "algo.proximal=unsquared"],
    ["algo=fedacg"],
    ["norm=fedbn", "algo=fedacg", "algo.beta=0.1"],
    ["algo=fedadam"],
    ["algo=fedavgm"],
    ["algo=fedsam", "algo.rho=0.1"],
    ["algo=fedsam", "norm=fbn"],
    ["algo=fedwon", "norm=none"],
    ["algo=fedwon", "norm=hbn"],
    ["algo=fedyogi"],
    ["algo=fedadagrad"],
])
@pytest.mark.parametrize("engine", ["vmap", "packed"])
def test_every_algorithm_is_equivalent(overrides, engine, tmp_path):
    assert_equivalent(["norm=bn", *overrides], tmp_path, engine=engine)


@pytest.mark.parametrize(("overrides", "expected"), [
    (["norm=bn", "batch_size=8"], "packed"),
    (["norm=bn", "batch_size=32"], "loop"),
    (["norm=fbn", "batch_size=8"], "packed"),
    (["norm=bn", "batch_size=8", "clients_per_round=1"], "loop"),
])
def test_auto_on_cpu_picks_packed_where_it_runs(overrides, expected, caplog):
    cfg = compose_config([*BASE, *overrides])
    fed, _ = build_federation(cfg, torch.device("cpu"))
    with caplog.at_level(logging.WARNING, logger="fedbn_bench"):
        assert select_engine("auto", fed, cfg.batch_size, cfg.clients_per_round, torch.device("cpu")) == expected
    assert not caplog.records, "auto chooses silently"


@pytest.mark.parametrize(("unsupported", "backend", "fallback"), [
    ((), "packed", None),
    (("packed",), "vmap", "not packed (why packed)"),
    (("packed", "vmap"), "loop", "not packed (why packed); not vmap (why vmap)"),
])
def test_auto_on_cuda_prefers_packed_then_vmap_then_loop(unsupported, backend, fallback, monkeypatch):
    """The order measured on the H200 (results/bench/gpu_hbn_cifar10.csv), at any batch size, with
    the reason for each backend passed over."""
    cfg = compose_config([*BASE, "norm=bn"])
    fed, _ = build_federation(cfg, torch.device("cpu"))
    monkeypatch.setattr(select, "unsupported_reason", lambda b, _: f"why {b}" if b in unsupported else None)
    choice = choose_engine("auto", fed, 32, cfg.clients_per_round, torch.device("cuda"))
    assert (choice.requested, choice.backend, choice.fallback) == ("auto", backend, fallback)


def test_auto_is_the_default_and_the_run_says_which_backend_trained_and_why(tmp_path, caplog):
    """``summary.json`` and the terminal (one log line, and the run's last line) name the backend
    and, when ``auto`` passed over the fastest, why: MOON runs on no stacked backend."""
    assert compose_config([]).engine.name == "auto"
    tiny = ["rounds=1", "num_clients=4", "algo.local_steps=1", "batch_size=8"]
    with caplog.at_level(logging.INFO, logger="fedbn_bench"):
        packed = run_experiment(compose_config(tiny), tmp_path / "bn")
        moon = run_experiment(compose_config([*tiny, "algo=moon"]), tmp_path / "moon")
    assert {k: packed[k] for k in ("engine", "engine_requested")} == {"engine": "packed", "engine_requested": "auto"}
    assert "engine_fallback" not in packed
    reason = moon["engine_fallback"]
    assert moon["engine"] == "loop" and reason.startswith("not packed (") and "MOON" in reason
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("engine=")] == [
        "engine=auto runs on packed", f"engine=auto runs on loop: {reason}"]
    assert json.loads((tmp_path / "moon" / "summary.json").read_text())["engine_fallback"] == reason
    assert ", engine loop, run dir" in summary_line(moon, tmp_path / "moon")


@pytest.mark.parametrize("engine", ["vmap", "packed"])
def test_stacked_backends_run_end_to_end_with_augmentation_and_dropout(engine, tmp_path):
    """Through the runner (augmentation on, fbn_cnn's dropout active): a complete run whose
    augmented batches are the loop's (same samples seen) and whose accuracy is in the same range."""
    common = ["model=fbn_cnn", "rounds=2", "eval_every=1", "dataset.augment=true", "num_clients=4",
              "clients_per_round=2"]
    loop = run_experiment(compose_config([*common, "engine=loop"]), tmp_path / "loop")
    vmap = run_experiment(compose_config([*common, f"engine={engine}"]), tmp_path / engine)
    assert loop["status"] == vmap["status"] == "completed"
    assert abs(loop["final_test_acc"] - vmap["final_test_acc"]) < 0.15


def test_channels_last_loop_matches_the_plain_loop(tmp_path):
    plain, _ = simulate("loop", ["norm=bn"], tmp_path, torch.float32)
    nhwc, _ = simulate("loop", ["norm=bn"], tmp_path, torch.float32, channels_last=True)
    conv = nhwc.fed.model.features[4].weight
    assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()
    assert_same_state(plain.store.global_state, nhwc.store.global_state, "global", TOLERANCE[torch.float32])


@pytest.mark.parametrize("mixing", ["fixed", "batch_only", "global_only"])
def test_packed_hbn_with_fixed_mixing_is_equivalent(mixing, tmp_path):
    assert_equivalent(["norm=hbn", f"norm.mixing={mixing}"], tmp_path, engine="packed")


@pytest.mark.parametrize("engine", ["vmap", "packed"])
def test_hbn_moving_average_ablation_is_equivalent(engine, tmp_path):
    assert_equivalent(["norm=hbn", "norm.stats_source=moving_average"], tmp_path, engine=engine)


@pytest.mark.parametrize("norm", ["bn", "gn"])
def test_packed_without_affine_parameters_is_equivalent(norm, tmp_path):
    assert_equivalent([f"norm={norm}", "norm.affine=false"], tmp_path, engine="packed")


def test_packed_hbn_without_affine_parameters_is_equivalent(tmp_path):
    assert_equivalent(["norm=hbn", "norm.affine=false"], tmp_path, engine="packed")
