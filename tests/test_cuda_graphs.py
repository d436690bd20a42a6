"""``engine.cuda_graphs`` (issue 42 §2) on a CPU: the rules and their one-line reasons, bad values
refused before training, and the graph path itself under ``emulate`` (``TracedStepGraph``: a CUDA
graph's contract, replayed on the CPU), which must give the eager results exactly. The same
comparison on a GPU with real CUDA graphs is in the CUDA tier (``tests/test_cuda.py``)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from conftest import build_simulation, compose_config, watch_local_steps
from fedbn_bench.engine.backends import stacked
from fedbn_bench.engine.graphs import (CAPTURED, GraphedSteps, SyncProbe, check_mode, graph_status, run_reason,
                                       sync_reason)
from fedbn_bench.engine import graphs, step_graph
from fedbn_bench.engine.replicas import ReplicaGroup
from fedbn_bench.engine.step_graph import AnchoredPool, CudaStepGraph, TracedStepGraph, abandon_capture
from fedbn_bench.errors import ConfigError
from fedbn_bench.norms import NORMS
from fedbn_bench.runner import run_experiment

CUDA, CPU = torch.device("cuda"), torch.device("cpu")
SMALL = ["model=simple_cnn", "num_clients=4", "batch_size=8", "algo.local_steps=4"]


@pytest.mark.parametrize(("mode", "line"), [("off", "engine.cuda_graphs=off: eager"),
                                            ("auto", "engine.cuda_graphs=auto: eager: not a CUDA device")])
def test_the_log_names_the_mode_once(tmp_path, caplog, mode, line):
    """Issue 59: a CPU run logged ``engine.cuda_graphs=off: eager: engine.cuda_graphs=off``."""
    with caplog.at_level("INFO", logger="fedbn_bench.engine.simulation"):
        build_simulation(SMALL, tmp_path, engine="packed", cuda_graphs=mode)
    assert [r.getMessage() for r in caplog.records if "cuda_graphs" in r.getMessage()] == [line]


@pytest.mark.parametrize(("mode", "device", "engine", "adversarial", "reason"), [
    ("off", CUDA, "packed", False, "engine.cuda_graphs=off"),
    ("auto", CPU, "packed", False, "not a CUDA device"),
    ("auto", CUDA, "loop", False, "engine=loop trains one client at a time (packed and vmap capture)"),
    ("auto", CUDA, "packed", True, "adversarial training's attacks are not captured"),
    ("auto", CUDA, "vmap", False, None),
    ("on", CUDA, "packed", False, None),
    ("emulate", CPU, "packed", False, None),
])
def test_the_run_rule_names_the_first_rule_that_fails(mode, device, engine, adversarial, reason):
    assert run_reason(mode, device, engine, adversarial) == reason
    if mode != "on":
        assert graph_status(mode, device, engine, adversarial) == (CAPTURED if reason is None else f"eager: {reason}")


def test_the_sync_rule_names_each_synchronising_operation_once():
    assert sync_reason(["_local_scalar_dense", "nonzero", "_local_scalar_dense"]) == \
        "the local step synchronises with the host (_local_scalar_dense, nonzero)"
    assert sync_reason([]) is None


@pytest.mark.parametrize(("mode", "device", "message"), [
    ("sometimes", CUDA, "engine.cuda_graphs='sometimes' is unknown; allowed: auto, on, off, emulate"),
    ("on", CPU, "engine.cuda_graphs=on needs a CUDA device (device=cpu)"),
])
def test_bad_modes_are_refused(mode, device, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_mode(mode, device)


def test_on_refuses_a_run_that_cannot_be_captured():
    with pytest.raises(ConfigError, match=r"engine.cuda_graphs=on, but the local steps cannot be captured: "
                                          r"engine=loop trains one client at a time"):
        graph_status("on", CUDA, "loop", False)


def test_a_run_asking_for_graphs_on_a_cpu_fails_before_training(tmp_path):
    cfg = compose_config(["device=cpu", "engine.cuda_graphs=on"])
    with pytest.raises(ConfigError, match=r"engine.cuda_graphs=on needs a CUDA device \(device=cpu\)"):
        run_experiment(cfg, tmp_path)
    assert not list(tmp_path.iterdir())


def test_the_probe_sees_host_reads_and_masks_only():
    x = torch.arange(6.0) - 2
    with SyncProbe() as probe:
        y = (x * 2).relu().sum()
    assert probe.calls == []
    with SyncProbe() as probe:
        y.item()
        x[x > 0]
        x.nonzero()
    assert probe.calls == ["_local_scalar_dense", "index", "nonzero"]


def test_a_packed_local_step_never_synchronises(tmp_path, monkeypatch):
    """FedAvg with momentum, weight decay and clipping on a packed Simple-CNN with BatchNorm:
    nothing inside the round's local steps reads a device value on the host."""
    probes = watch_local_steps(monkeypatch, SyncProbe)
    sim = build_simulation([*SMALL[:-1], "algo.local_steps=3", "norm=bn", "algo=fedavg"], tmp_path, rounds=1,
                           dtype=torch.float32, engine="packed")
    assert sim.fed.algo.clip_grad_norm and sim.fed.algo.cfg.momentum
    sim.run_round(0)
    assert len(probes) == 1 and probes[0].calls == []


def two_rounds(overrides: list[str], engine: str, mode: str, tmp_path) -> dict[str, torch.Tensor]:
    sim = build_simulation([*SMALL, *overrides], tmp_path / mode, rounds=2, dtype=torch.float32, engine=engine,
                           cuda_graphs=mode)
    sim.run_round(0)
    sim.run_round(1)
    return {k: v.clone() for k, v in sim.store.global_state.items()}


def assert_replayed_equals_eager(overrides: list[str], engine: str, tmp_path, monkeypatch, steps: int = 4) -> None:
    """Two rounds with the traced graph equal the eager rounds bit for bit (the same kernels on the
    same values), and the graph was replayed for every step but the probed first one (a round of
    ``steps`` local steps: step 1 eager under the probe, step 2 captured, then replayed)."""
    replays = []
    replay = TracedStepGraph.replay

    def counted(self):
        replays.append(1)
        replay(self)

    monkeypatch.setattr(TracedStepGraph, "replay", counted)
    eager = two_rounds(overrides, engine, "off", tmp_path)
    assert not replays
    graphed = two_rounds(overrides, engine, "emulate", tmp_path)
    assert len(replays) == 2 * max(steps - 2, 0)
    for key in eager:
        torch.testing.assert_close(graphed[key], eager[key], rtol=0, atol=0, msg=key)


@pytest.mark.parametrize("norm", [n for n in NORMS.names() if n not in ("dbn", "fedrbn")])
def test_every_norm_replays_as_it_runs_eagerly(norm, tmp_path, monkeypatch):
    options = ["norm.freeze_fraction=0.5"] if norm == "fixbn" else []
    assert_replayed_equals_eager([f"norm={norm}", *options, "algo=fedavg"], "packed", tmp_path, monkeypatch)


@pytest.mark.parametrize("algo", ["fedadam", "scaffold", "fedprox", "fedsam", "fedacg", "moon", "fedwon"])
def test_every_algorithm_family_replays_as_it_runs_eagerly(algo, tmp_path, monkeypatch):
    norm = "none" if algo == "fedwon" else "bn"
    assert_replayed_equals_eager([f"norm={norm}", f"algo={algo}"], "packed", tmp_path, monkeypatch)


def test_dsgd_takes_one_step_a_round_so_nothing_is_replayed(tmp_path, monkeypatch):
    assert_replayed_equals_eager(["norm=fbn", "algo=dsgd"], "packed", tmp_path, monkeypatch, steps=1)


def test_vmap_replays_as_it_runs_eagerly(tmp_path, monkeypatch):
    assert_replayed_equals_eager(["norm=hbn", "algo=fedavg"], "vmap", tmp_path, monkeypatch)


def test_a_host_value_that_changes_between_steps_is_frozen_by_the_replay():
    """What a graph would do, and what the eager comparison above would catch: a Python number read by
    the step is the one of the captured step."""
    def run(graphed: bool) -> torch.Tensor:
        w, scale = torch.zeros(3), [1.0]

        def step(n, x, y):
            w.add_(x * scale[0])
            scale[0] += 1

        runner = GraphedSteps(TracedStepGraph)
        for s in range(4):
            x = torch.full((3,), float(s))
            runner(step, None, x, x) if graphed else step(None, x, x)
        return w

    assert run(False).tolist() == [0 + 1 * 2 + 2 * 3 + 3 * 4] * 3
    assert run(True).tolist() == [0 + 1 * 2 + 2 * 2 + 3 * 2] * 3  # step 2 captured with scale 2


def test_a_synchronising_step_is_never_captured():
    seen = []

    def step(n, x, y):
        seen.append(float(x.sum()))

    runner = GraphedSteps(TracedStepGraph)
    for s in range(3):
        runner(step, None, torch.full((2,), float(s)), torch.zeros(2))
    assert seen == [0.0, 2.0, 4.0]
    assert runner.reason == "the local step synchronises with the host (_local_scalar_dense)"


def test_unequal_local_steps_get_a_graph_per_shape(tmp_path, monkeypatch):
    """Clients of unequal sizes training one epoch: the step's shape shrinks as clients finish, each
    shape is captured and replayed on its own, and the rounds equal the eager ones bit for bit."""
    shapes = []
    capture = GraphedSteps.capture

    def seen(self, graph, shape, *args):
        shapes.append(shape[0])
        capture(self, graph, shape, *args)

    monkeypatch.setattr(GraphedSteps, "capture", seen)
    unequal = ["algo.local_steps=null", "algo.local_epochs=1", "alpha=0.3", "norm=bn", "num_clients=4",
               "batch_size=8", "model=simple_cnn"]
    results = []
    for mode in ("off", "emulate"):
        sim = build_simulation(unequal, tmp_path / mode, rounds=1, dtype=torch.float32, engine="packed",
                               cuda_graphs=mode)
        sim.run_round(0)
        results.append(sim.store.global_state)
    assert len(shapes) > 1 and shapes == sorted(shapes, reverse=True), shapes
    for key in results[0]:
        torch.testing.assert_close(results[1][key], results[0][key], rtol=0, atol=0, msg=key)


def test_a_replayed_output_that_changes_shape_is_an_error():
    graph = TracedStepGraph()
    x = torch.tensor([1.0, -1.0, 2.0])
    graph.capture(lambda: x.nonzero())
    x.fill_(0.0)
    with pytest.raises(RuntimeError, match="gave shape .* on replay, .* at capture"):
        graph.replay()



def test_replicas_in_one_stack_replay_as_they_run_eagerly(tmp_path):
    """``replicas=k`` on a graphed stack (issue 42 §3): the k seeds' clients are one stack, one graph."""
    states = {}
    for mode in ("off", "emulate"):
        sims = [build_simulation([*SMALL, "norm=bn", f"seed={s}"], tmp_path / mode / str(s), rounds=2,
                                 dtype=torch.float32, engine="packed", cuda_graphs=mode) for s in range(3)]
        group = ReplicaGroup(sims, progress=False)
        assert group.unshared is None
        for r in range(2):
            group.train_round(sims, r)
        states[mode] = [sim.store.global_state for sim in sims]
    for eager, graphed in zip(states["off"], states["emulate"]):
        for key in eager:
            torch.testing.assert_close(graphed[key], eager[key], rtol=0, atol=0, msg=key)


class FakeCudaGraph:
    """A CUDA graph's contract without a GPU, where ``TracedStepGraph`` differs from it: capturing runs
    nothing (the step runs only when replayed); ``fail_capture`` makes the capture fail as a CUDA capture
    of an illegal operation does."""

    runs_on_capture = False
    captures: list["FakeCudaGraph"] = []
    fail_capture = False

    def __init__(self) -> None:
        self.step = None
        self.replays = 0

    def warmup(self, step) -> None:
        step()

    def capture(self, step) -> None:
        FakeCudaGraph.captures.append(self)
        if FakeCudaGraph.fail_capture:
            raise RuntimeError("operation not permitted when stream is capturing\nCUDA kernel errors ...")
        self.step = step

    def replay(self) -> None:
        self.replays += 1
        self.step()


@pytest.fixture
def fake_cuda(monkeypatch):
    """Runs ``engine.cuda_graphs=emulate`` on ``FakeCudaGraph`` instead of the traced graph."""
    monkeypatch.setattr(FakeCudaGraph, "captures", [])
    monkeypatch.setattr(stacked, "step_graph_maker", lambda mode, device: FakeCudaGraph)
    return FakeCudaGraph


@pytest.mark.parametrize("norm", ["bn", "hbn", "fbn"])
def test_a_graph_that_runs_only_on_replay_gives_the_eager_rounds(norm, tmp_path, fake_cuda):
    """GraphedSteps's CUDA branch: a capture that runs nothing must be followed by a replay, and each later
    step of the shape replays (4 local steps: 1 eager, 1 captured + replayed, 2 replayed, per round)."""
    eager = two_rounds([f"norm={norm}", "algo=fedavg"], "packed", "off", tmp_path)
    graphed = two_rounds([f"norm={norm}", "algo=fedavg"], "packed", "emulate", tmp_path)
    assert [g.replays for g in fake_cuda.captures] == [3, 3]
    for key in eager:
        torch.testing.assert_close(graphed[key], eager[key], rtol=0, atol=0, msg=key)


def test_the_summary_records_what_the_graphs_ran(tmp_path, fake_cuda):
    summary = run_experiment(compose_config([*SMALL, "norm=bn", "rounds=3", "eval_every=3", "logger=none",
                                             "progress=false", "engine=packed", "engine.cuda_graphs=emulate"]),
                             tmp_path)
    assert summary["cuda_graphs"] == CAPTURED
    assert summary["cuda_graphs_ran"] == {"rounds_replayed": 3, "rounds_eager": 0, "replays": 9, "eager_reasons": {},
                                          "off": None}


def two_rounds_equal_to_eager(tmp_path, caplog):
    """Two rounds under ``emulate`` (warnings in ``caplog``), equal bit for bit to the eager rounds; the simulation."""
    eager = two_rounds(["norm=bn", "algo=fedavg"], "packed", "off", tmp_path)
    sim = build_simulation([*SMALL, "norm=bn", "algo=fedavg"], tmp_path / "graphed", rounds=2, dtype=torch.float32,
                           engine="packed", cuda_graphs="emulate")
    with caplog.at_level("WARNING", logger="fedbn_bench"):
        sim.run_round(0)
        sim.run_round(1)
    for key in eager:
        torch.testing.assert_close(sim.store.global_state[key], eager[key], rtol=0, atol=0, msg=key)
    return sim


def test_a_failed_capture_reruns_the_round_eagerly_and_turns_the_graphs_off(tmp_path, fake_cuda, monkeypatch, caplog):
    """The round is re-run from its start (equal to the eager round bit for bit), the step's own error is
    in the log and the record, and no later round tries to capture again."""
    monkeypatch.setattr(FakeCudaGraph, "fail_capture", True)
    sim = two_rounds_equal_to_eager(tmp_path, caplog)
    assert len(fake_cuda.captures) == 1
    reason = "the capture failed (operation not permitted when stream is capturing)"
    assert sim.graph_record.off == reason
    assert (sim.graph_record.rounds_replayed, sim.graph_record.eager_reasons) == (0, {reason: 2})
    assert "RuntimeError: operation not permitted when stream is capturing" in caplog.text


def test_on_refuses_to_go_on_eagerly_after_a_failed_capture(tmp_path, fake_cuda, monkeypatch):
    monkeypatch.setattr(FakeCudaGraph, "fail_capture", True)
    sim = build_simulation([*SMALL, "norm=bn"], tmp_path, rounds=1, dtype=torch.float32, engine="packed",
                           cuda_graphs="emulate")
    monkeypatch.setattr(sim.backend.ctx, "cuda_graphs", "on")
    with pytest.raises(RuntimeError, match=r"engine.cuda_graphs=on, but round 1's the capture failed"):
        sim.run_round(0)


def test_on_refuses_a_round_that_falls_back(tmp_path, fake_cuda, monkeypatch):
    sim = build_simulation([*SMALL, "norm=bn"], tmp_path, rounds=1, dtype=torch.float32, engine="packed",
                           cuda_graphs="emulate")
    monkeypatch.setattr(sim.backend.ctx, "cuda_graphs", "on")
    monkeypatch.setattr(stacked.GraphedSteps, "__call__", lambda self, step, n, x, y: (
        setattr(self, "reason", "the local step synchronises with the host (nonzero)"), step(n, x, y)))
    with pytest.raises(RuntimeError, match=r"round 1's local steps ran eagerly: the local step synchronises"):
        sim.run_round(0)


class CountedPoolGraph:
    """A CUDA graph as torch 2.11's caching allocators (host and device alike) count the pool it captures
    into: the first capture into a pool makes it with use count 1, each later one adds 1 and asserts the
    count is above 0 (a pool whose graphs are all gone is not made again), the graph's end subtracts 1."""

    use_counts: dict = {}

    def __init__(self) -> None:
        self.pool = None

    def capture_begin(self, pool=None) -> None:
        count = CountedPoolGraph.use_counts.get(pool)
        if count == 0:
            raise RuntimeError("it->second->use_count > 0 INTERNAL ASSERT FAILED at CachingHostAllocator.h")
        CountedPoolGraph.use_counts[pool] = (count or 0) + 1
        self.pool = pool

    def capture_end(self) -> None:
        pass

    def __del__(self) -> None:
        if self.pool in CountedPoolGraph.use_counts:
            CountedPoolGraph.use_counts[self.pool] -= 1


def test_a_rounds_graphs_are_dropped_before_the_next_round_captures_into_the_same_pool(monkeypatch):
    """The H200's failure at round 2 (results/bench/gpu_check.log): the anchor keeps the shared pool's
    count above 0 between rounds; without it the second round's capture asserts."""
    monkeypatch.setattr(CountedPoolGraph, "use_counts", {})
    monkeypatch.setattr(CudaStepGraph, "on_side_stream", lambda self, work: work())
    make = AnchoredPool(torch.device("cpu"), stream=object(), pool=(0, 1), new_graph=CountedPoolGraph)
    for _ in range(3):
        graphs = [make() for _ in range(2)]
        for graph in graphs:
            graph.capture(lambda: None)
        assert CountedPoolGraph.use_counts == {(0, 1): 3}
        del graphs, graph
    assert CountedPoolGraph.use_counts == {(0, 1): 1}


def test_an_abandoned_capture_ends_the_pools_routing_and_the_generators_capture(monkeypatch):
    """After a capture whose end failed, the caching allocator stops routing to the pool and the device generator
    gets a fresh state (out of capture mode), as the eager re-run of the round needs; each step is best effort."""
    calls = []

    class Generator:
        def clone_state(self):
            return "fresh state"

        def graphsafe_set_state(self, state):
            calls.append(("generator", state))

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "default_generators", (Generator(), Generator()), raising=False)
    monkeypatch.setattr(torch._C, "_cuda_endAllocateToPool", lambda device, pool: calls.append(("pool", device, pool)),
                        raising=False)
    abandon_capture((0, 7), torch.device("cuda", 1))   # the capture stream's device, not the current one
    assert calls == [("pool", 1, (0, 7)), ("generator", "fresh state")]
    calls.clear()
    abandon_capture((0, 7), torch.device("cuda"))      # no index: the current device
    assert calls == [("pool", 0, (0, 7)), ("generator", "fresh state")]

    def not_routing(device, pool):
        raise RuntimeError("endAllocatePool: not currently recording to mempool_id")

    monkeypatch.setattr(torch._C, "_cuda_endAllocateToPool", not_routing, raising=False)
    calls.clear()
    abandon_capture((0, 7), torch.device("cuda", 0))
    assert calls == [("generator", "fresh state")]


def test_a_failed_cuda_capture_reports_the_steps_own_error(monkeypatch):
    """``CudaStepGraph``: ending a broken capture raises about the capture; the step's error is the one seen."""
    class BrokenGraph:
        def capture_begin(self, pool=None):
            pass

        def capture_end(self):
            raise RuntimeError("operation failed due to a previous error during capture")

    graph = CudaStepGraph.__new__(CudaStepGraph)
    graph.graph, graph.pool, graph.stream = BrokenGraph(), None, SimpleNamespace(device=torch.device("cuda", 1))
    monkeypatch.setattr(CudaStepGraph, "on_side_stream", lambda self, work: work())

    def step():
        raise RuntimeError("the step's own error")

    abandoned = []
    monkeypatch.setattr(step_graph, "abandon_capture", lambda pool, device: abandoned.append((pool, device)))
    with pytest.raises(RuntimeError, match="the step's own error"):
        graph.capture(step)
    assert abandoned == [(None, torch.device("cuda", 1))]    # the graph's pool and stream's device, after its end failed


class FailingGraph:
    """A CUDA graph whose ``capture_begin`` or ``capture_end`` raises (the H200's failure was in ``capture_begin``)."""

    def __init__(self, fails_in: str) -> None:
        self.fails_in = fails_in

    def capture_begin(self, pool=None):
        if self.fails_in == "capture_begin":
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")

    def capture_end(self):
        if self.fails_in == "capture_end":
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture")


@pytest.mark.parametrize("fails_in", ["capture_begin", "capture_end"])
def test_a_capture_that_fails_to_begin_or_end_is_abandoned(monkeypatch, fails_in):
    """Issue 59: only a step that raised and then a failing ``capture_end`` were cleaned up; a failure in
    ``capture_begin`` (the H200's) or in the final ``capture_end`` left the pool routed and the generator capturing."""
    graph = CudaStepGraph.__new__(CudaStepGraph)
    graph.graph, graph.pool, graph.stream = FailingGraph(fails_in), (0, 3), SimpleNamespace(device=torch.device("cuda", 0))
    monkeypatch.setattr(CudaStepGraph, "on_side_stream", lambda self, work: work())
    abandoned = []
    monkeypatch.setattr(step_graph, "abandon_capture", lambda pool, device: abandoned.append((pool, device)))
    with pytest.raises(RuntimeError, match="CUDA error"):
        graph.capture(lambda: None)
    assert abandoned == [((0, 3), torch.device("cuda", 0))]


def test_a_failed_anchor_capture_turns_the_graphs_off_instead_of_failing_the_run(tmp_path, monkeypatch, caplog):
    """Issue 59: ``AnchoredPool`` captures its anchor graph when the first round asks for graphs; its failure
    ended the run."""
    def no_anchor(mode, device):
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing")

    monkeypatch.setattr(stacked, "step_graph_maker", no_anchor)
    sim = two_rounds_equal_to_eager(tmp_path, caplog)
    reason = "the anchor graph's capture failed (CUDA error: operation not permitted when stream is capturing)"
    assert (sim.graph_record.off, sim.graph_record.eager_reasons) == (reason, {reason: 2})
    assert "RuntimeError: CUDA error: operation not permitted" in caplog.text


def test_a_failed_capture_reruns_the_given_jobs_with_unequal_local_steps(tmp_path, fake_cuda, monkeypatch):
    """The re-run after a failed capture must take the jobs as given, not the stack's order (sorted by steps):
    with unequal local steps the results went to the wrong clients (the state was off by 3.34)."""
    monkeypatch.setattr(FakeCudaGraph, "fail_capture", True)
    unequal = ["algo.local_steps=null", "algo.local_epochs=1", "alpha=0.3", "norm=bn", "num_clients=4",
               "batch_size=8", "model=simple_cnn"]
    states = {}
    for mode in ("off", "emulate"):
        sim = build_simulation(unequal, tmp_path / mode, rounds=1, dtype=torch.float32, engine="packed",
                               cuda_graphs=mode)
        sim.run_round(0)
        states[mode] = sim.store.global_state
    assert len(fake_cuda.captures) == 1
    for key in states["off"]:
        torch.testing.assert_close(states["emulate"][key], states["off"][key], rtol=0, atol=0, msg=key)


def test_replicas_sharing_one_stack_each_record_what_the_graphs_ran(tmp_path):
    """Issue 59: only the first replica's ``GraphRecord`` (the shared backend's) counted the rounds."""
    sims = [build_simulation([*SMALL, "norm=bn", f"seed={s}"], tmp_path / str(s), rounds=2, dtype=torch.float32,
                             engine="packed", cuda_graphs="emulate") for s in range(3)]
    group = ReplicaGroup(sims, progress=False)
    for r in range(2):
        group.train_round(sims, r)
    assert [sim.loop.graphs.summary()["cuda_graphs_ran"]["rounds_replayed"] for sim in sims] == [2, 2, 2]


class HiddenReplayGraph(FakeCudaGraph):
    """A CUDA graph's replay as the host sees it: the kernels run, no operation is dispatched through Python
    (a ``TorchDispatchMode``, the FLOP and ATen-operation counters, sees nothing)."""

    def replay(self) -> None:
        with torch._C._DisableTorchDispatch():
            super().replay()


@pytest.fixture
def hidden_replays(monkeypatch):
    """``engine.cuda_graphs=auto`` captures on the CPU, on ``HiddenReplayGraph``."""
    monkeypatch.setattr(FakeCudaGraph, "captures", [])
    run_reason = graphs.run_reason
    monkeypatch.setattr(graphs, "run_reason", lambda mode, device, *rest: run_reason(mode, CUDA, *rest))
    monkeypatch.setattr(stacked, "step_graph_maker", lambda mode, device: HiddenReplayGraph)
    return HiddenReplayGraph


def test_train_macs_per_round_counts_the_replayed_steps(tmp_path, hidden_replays):
    """Issue 59: the counted round replayed its steps on CUDA, whose work no counter sees."""
    macs = {}
    for mode in ("off", "auto"):
        summary = run_experiment(compose_config([*SMALL, "norm=bn", "rounds=2", "eval_every=2", "count_macs=true",
                                                 "engine=packed", f"engine.cuda_graphs={mode}"]), tmp_path / mode)
        macs[mode] = summary["train_macs_per_round"]
    assert hidden_replays.captures and macs["auto"] == macs["off"] > 0


def test_the_benchmark_counts_flops_and_operations_on_an_eager_round(bench, hidden_replays):
    """Missed by every test (issue 59): ``scripts/bench.py`` counting a graphed round's FLOPs."""
    small = ["algo.local_steps=4"]
    graphed = bench.measure("hbn_cifar10", "packed", 1, 0, CPU, small)
    eager = bench.measure("hbn_cifar10", "packed_eager", 1, 0, CPU, small)
    assert graphed["backend"] == "packed+graphs" and eager["backend"] == "packed"
    assert graphed["gflop_per_round"] == eager["gflop_per_round"] > 0
    assert graphed["aten_ops_per_step"] == eager["aten_ops_per_step"]
