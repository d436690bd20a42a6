"""``engine.cuda_graphs``: the local step as a replayed graph, and why a run's steps stay eager.

A CUDA graph replays a recorded sequence of kernels with no host work per operation (issue 42
§2: a packed step of HBN's Simple-CNN is bound by the host issuing ~150 operations). Modes:
``auto`` (capture where the rules below allow, else eager with a one-line reason), ``on`` (the
same, but a run that cannot be captured is refused before training), ``off``, and ``emulate``
(the graph path on any device with ``step_graph.TracedStepGraph``: a CPU check that a norm or
algorithm replays correctly; slower than eager).

Replay is only correct for a step that

* runs on a stacked backend (``packed``, ``vmap``): one step of all the round's clients;
* never waits for the device (no ``.item()``, no data-dependent shapes): a synchronisation in a
  captured region is an error, and a value read on the host would be frozen at capture time.
  ``SyncProbe`` watches the first step of every round;
* keeps its buffers from step to step, and its shape for long enough: the stacked backends
  compute only the clients still training (``stacked.py``), so when clients take unequal numbers
  of steps the step's shape changes each time one finishes, and each shape gets its own graph;
* trains with the algorithm's loss (adversarial training's attacks are not captured).

``GraphedSteps`` runs a round: per shape, the first step eagerly (on CUDA on the graphs' side
stream, the warm-up the CUDA-graphs notes ask for; the round's first under the probe), then the
second is captured over static copies of its batches and replayed for it and every later step of
that shape, each step's batches copied into the static ones. Host values the step uses (the
round's learning rate, the active clients) are constant within a round, and the graphs are made
again each round, as the round's stacks are new; every round's graphs are captured into the run's
one memory pool on its one side stream (``step_graph_maker``), so a round reuses the memory the
last round's graphs freed. The randomness is on the device: batches and augmentation are drawn once
per round (``engine/sampling.py``), dropout from the device generator, which replays advance.

A capture that fails (``CaptureFailed``, carrying the step's own error) turns the graphs off for the
rest of the run: the backend re-runs the round eagerly from its start state (``stacked.py``).
``GraphRecord`` keeps what ran, for ``summary.json``: rounds replayed and eager, replays, and why
rounds were eager; ``on`` refuses a run whose round falls back.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from fedbn_bench.engine.local_steps import OneStep
from fedbn_bench.engine.step_graph import AnchoredPool, StepGraph, TracedStepGraph
from fedbn_bench.errors import ConfigError

GRAPH_MODES = ("auto", "on", "off", "emulate")
SYNCHRONISING = frozenset({
    "_local_scalar_dense", "nonzero", "masked_select", "equal", "is_nonzero", "_unique", "_unique2",
    "unique_dim", "unique_consecutive", "bincount", "histc",
})
"""ATen operations that read a device value on the host (``.item()``, ``bool(t)``) or give an
output whose shape depends on values."""
CAPTURED = "captured once a round, replayed for the later steps"
NOTHING_REPEATED = "no step shape ran more than once"
"""Why a round replayed nothing without falling back (DSGD's one local step)."""


class SyncProbe(TorchDispatchMode):
    """Records the synchronising operations run inside it (``calls``: their names, in order),
    boolean-mask indexing included."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__
        if name in SYNCHRONISING or (name == "index" and _has_mask(args)):
            self.calls.append(name)
        return func(*args, **(kwargs or {}))


def _has_mask(args: tuple) -> bool:
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)


def check_mode(mode: Any, device: torch.device) -> None:
    """``engine.cuda_graphs`` must be one of ``GRAPH_MODES``; ``on`` needs a CUDA device."""
    if mode not in GRAPH_MODES:
        raise ConfigError(f"engine.cuda_graphs='{mode}' is unknown; allowed: {', '.join(GRAPH_MODES)}")
    if mode == "on" and device.type != "cuda":
        raise ConfigError(f"engine.cuda_graphs=on needs a CUDA device (device={device.type}); use auto or off")


def run_reason(mode: str, device: torch.device, engine: str, adversarial: bool) -> Optional[str]:
    """Why no local step of the run is captured (one line, the first rule that fails), or ``None``
    when each round may be; ``adversarial``: the run trains on attacks."""
    if mode == "off":
        return "engine.cuda_graphs=off"
    if mode != "emulate" and device.type != "cuda":
        return "not a CUDA device"
    if engine not in ("packed", "vmap"):
        return f"engine={engine} trains one client at a time (packed and vmap capture)"
    if adversarial:
        return "adversarial training's attacks are not captured"
    return None


def graph_status(mode: str, device: torch.device, engine: str, adversarial: bool) -> str:
    """``summary.json``'s ``cuda_graphs``: ``CAPTURED`` or why the steps are eager; ``on`` refuses a
    run that would be eager."""
    reason = run_reason(mode, device, engine, adversarial)
    if reason is not None and mode == "on":
        raise ConfigError(f"engine.cuda_graphs=on, but the local steps cannot be captured: {reason}; use auto or off")
    return CAPTURED if reason is None else f"eager: {reason}"


def status_line(mode: str, status: str) -> str:
    """The run's log line for its ``graph_status``: the mode, and the status unless it only repeats the mode (``off``)."""
    return f"engine.cuda_graphs={mode}: " + ("eager" if mode == "off" else status)


def sync_reason(synchronising: list[str]) -> Optional[str]:
    """Why a round's steps run eagerly when a ``SyncProbe`` saw ``synchronising`` operations in its
    first step (one line), or ``None``."""
    if synchronising:
        return f"the local step synchronises with the host ({', '.join(sorted(set(synchronising)))})"
    return None


def step_graph_maker(mode: str, device: torch.device) -> Callable[[], StepGraph]:
    """The recorded steps of a run on ``device`` under ``mode``: its traced stand-in for ``emulate``, else CUDA graphs
    on one side stream sharing one memory pool, made once per run (safe: a round replays a graph only
    until the next one is captured, as the active clients only shrink, and never replays an earlier
    round's); ``step_graph.AnchoredPool`` keeps the pool alive between rounds, so a round's captures reuse
    the memory the last round's graphs freed."""
    if mode == "emulate":
        return TracedStepGraph
    return AnchoredPool(device)


@contextmanager
def graphs_set_aside(ctx: Any) -> Iterator[None]:
    """The local steps run under it eagerly (``ctx``: a backend's ``TrainingContext``): a replayed CUDA graph
    dispatches nothing, so FLOPs and ATen operations are counted on an eager round, which runs the same kernels
    (the round is not in ``GraphRecord``)."""
    mode, ctx.cuda_graphs = ctx.cuda_graphs, None
    try:
        yield
    finally:
        ctx.cuda_graphs = mode


class CaptureFailed(RuntimeError):
    """A step's capture failed (``__cause__``: the step's own error); the round must be re-run eagerly."""


_FAILED_CAPTURES = [0]


def may_empty_cache() -> bool:
    """Whether ``torch.cuda.empty_cache()`` is safe in this process: before torch 2.12 a failed capture
    can leave the caching allocator believing a capture is under way, and emptying it then asserts."""
    return not _FAILED_CAPTURES[0] or torch.__version__ >= "2.12"


@dataclass
class GraphRecord:
    """What a run's local steps did under ``engine.cuda_graphs`` (``summary.json``): ``planned`` is the
    status fixed before training (``graph_status``); rounds whose steps replayed a graph, rounds that ran
    eagerly and why (``eager_reasons``: reason -> rounds), the replays, and the reason the graphs were
    turned off for the rest of the run (``off``, after a failed capture)."""

    planned: str
    rounds_replayed: int = 0
    rounds_eager: int = 0
    replays: int = 0
    eager_reasons: dict[str, int] = field(default_factory=dict)
    off: Optional[str] = None

    def count(self, steps: Optional["GraphedSteps"]) -> Optional[str]:
        """One stack's round (``steps``: its runner, ``None`` once the graphs are off): replayed, or
        eager; returns the reason it was eager where the graphs fell back (``None`` otherwise, also for
        a round in which no step shape ran twice, e.g. DSGD's one step)."""
        if steps is not None and steps.replays:
            self.rounds_replayed += 1
            self.replays += steps.replays
            return None
        fallback = self.off if steps is None else steps.reason
        reason = fallback or NOTHING_REPEATED
        self.rounds_eager += 1
        self.eager_reasons[reason] = self.eager_reasons.get(reason, 0) + 1
        return fallback

    def summary(self) -> dict[str, Any]:
        """``cuda_graphs`` (the plan) and, where the plan was to capture, ``cuda_graphs_ran``."""
        ran = {k: v for k, v in asdict(self).items() if k != "planned"}
        return {"cuda_graphs": self.planned, **({"cuda_graphs_ran": ran} if self.planned == CAPTURED else {})}

    def state(self) -> dict[str, Any]:
        return asdict(self)

    def restore(self, state: dict[str, Any]) -> None:
        """Continue counting from a checkpoint's ``state()`` (in place: the backend holds this record)."""
        vars(self).update(state)


class GraphedSteps:
    """One round's local steps of a stack, by shape (the active clients shrink as clients finish,
    ``stacked.py``): a shape's first step eager (the round's very first under a ``SyncProbe``), its
    second captured over static copies of its batches and replayed for it and each later step of
    that shape. ``reason``: why it stopped capturing (every later step is then eager); ``replays``:
    the steps run by replaying a graph."""

    def __init__(self, make_graph: Callable[[], StepGraph]) -> None:
        self.make_graph = make_graph
        self.warm: dict[tuple, StepGraph] = {}
        self.graphs: dict[tuple, tuple[StepGraph, tuple[torch.Tensor, torch.Tensor]]] = {}
        self.reason: Optional[str] = None
        self.replays = 0

    def __call__(self, step: OneStep, n: Optional[int], x: torch.Tensor, y: torch.Tensor) -> None:
        shape = (n, tuple(x.shape), tuple(y.shape))
        if self.reason is not None:
            step(n, x, y)
        elif shape in self.graphs:
            graph, inputs = self.graphs[shape]
            for static, new in zip(inputs, (x, y)):
                static.copy_(new)
            graph.replay()
            self.replays += 1
        elif shape in self.warm:
            self.capture(self.warm.pop(shape), shape, step, n, x, y)
        else:
            graph = self.make_graph()
            if self.graphs or self.warm:
                graph.warmup(lambda: step(n, x, y))
            else:  # the round's first step
                with SyncProbe() as probe:
                    graph.warmup(lambda: step(n, x, y))
                self.reason = sync_reason(probe.calls)
            self.warm[shape] = graph

    def capture(self, graph: StepGraph, shape: tuple, step: OneStep, n: Optional[int], x: torch.Tensor,
                y: torch.Tensor) -> None:
        """Capture the step of ``shape`` and run it (on CUDA: replay it once, as a capture runs nothing).
        A failed capture raises ``CaptureFailed`` from the step's error: what the broken capture left
        behind (host state the step changed, memory it took) is unknown, so the round is re-run eagerly
        from its start (``stacked.py``)."""
        static_x, static_y = x.clone(), y.clone()
        try:
            graph.capture(lambda: step(n, static_x, static_y))
        except RuntimeError as error:
            if graph.runs_on_capture:
                raise
            _FAILED_CAPTURES[0] += 1
            raise CaptureFailed(f"the capture failed ({str(error).splitlines()[0]})") from error
        if not graph.runs_on_capture:
            graph.replay()
            self.replays += 1
        self.graphs[shape] = (graph, (static_x, static_y))
