"""A recorded local step and its replay: a CUDA graph, or the same contract traced on any device.

Both record a step once (``capture``) over static tensors and re-run exactly the recorded work on
``replay``, with every host value (Python numbers, shapes, which branch was taken) frozen as it was
at capture; what changes between replays is only what lies in the recorded tensors' memory.

* ``CudaStepGraph``: ``torch.cuda.CUDAGraph`` (PyTorch's "whole network capture": forward,
  backward and the optimizer in one graph). Capture records the kernels without running them, so
  the captured step is replayed once afterwards; a warm-up step runs on the side stream first, as
  the CUDA-graphs notes require (lazy initialisation of cuBLAS/cuDNN and of autograd's streams).
  Random operations draw from the device generator's Philox stream, advanced on every replay.
* ``TracedStepGraph``: records the ATen operations of a step (``TorchDispatchMode``) and replays
  them in order on the same tensors, writing each fresh result into the recorded output's memory
  (outputs that alias an input, views and in-place operations, are redone in place). It keeps a
  CUDA graph's semantics on a CPU: a value read on the host at capture stays frozen, an input not
  copied into the static buffers is not seen. ``engine.cuda_graphs=emulate`` uses it, so the
  graph path of every norm and algorithm is tested without a GPU (``tests/test_cuda_graphs.py``).
  Two differences remain: a captured synchronisation is an error on CUDA and a frozen value here
  (``GraphedSteps`` probes for it first), and work on host tensors is not in a CUDA graph.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Protocol

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class StepGraph(Protocol):
    """What ``GraphedSteps`` needs of a recorded step."""

    runs_on_capture: bool
    """Whether ``capture`` also executes the step once."""

    def warmup(self, step: Callable[[], None]) -> None: ...

    def capture(self, step: Callable[[], None]) -> None: ...

    def replay(self) -> None: ...


class CudaStepGraph:
    """The step as a ``torch.cuda.CUDAGraph``, captured on ``stream`` into the memory ``pool`` (what
    ``torch.cuda.graph`` does, without its device-wide synchronisation and garbage collection, which
    would cost every round)."""

    runs_on_capture = False

    def __init__(self, stream: torch.cuda.Stream, pool: Any,
                 new_graph: Callable[[], Any] = torch.cuda.CUDAGraph) -> None:
        self.graph = new_graph()
        self.stream, self.pool = stream, pool

    def on_side_stream(self, work: Callable[[], None]) -> None:
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            work()
        torch.cuda.current_stream().wait_stream(self.stream)

    def warmup(self, step: Callable[[], None]) -> None:
        self.on_side_stream(step)

    def capture(self, step: Callable[[], None]) -> None:
        """Record ``step``; when it fails inside the capture, its own error is raised (ending the broken
        capture may raise too, about the capture rather than its cause). A capture that fails to begin
        or to end, or whose end fails after the step's error, is abandoned (``abandon_capture``)."""
        def captured() -> None:
            try:
                self.graph.capture_begin(pool=self.pool)
            except BaseException:
                abandon_capture(self.pool, self.stream.device)
                raise
            try:
                step()
            except BaseException:
                self.end_or_abandon(raise_error=False)
                raise
            self.end_or_abandon(raise_error=True)

        self.on_side_stream(captured)

    def end_or_abandon(self, raise_error: bool) -> None:
        """End the capture; if that fails, abandon it and raise the error when ``raise_error``."""
        try:
            self.graph.capture_end()
        except RuntimeError:
            abandon_capture(self.pool, self.stream.device)
            if raise_error:
                raise

    def replay(self) -> None:
        self.graph.replay()


def abandon_capture(pool: Any, device: torch.device) -> None:
    """Best effort after a capture that failed to begin or to end (CUDA raised before PyTorch's
    bookkeeping ran): the caching allocator stops routing this stream's allocations to ``pool``, and
    the device generators leave capture mode, so that the round can be re-run eagerly (on an H200 with
    torch 2.11 the eager re-run failed in dropout, "Offset increment outside graph capture encountered
    unexpectedly", and a later ``empty_cache`` asserted ``captures_underway.empty()``). ``device`` is the
    capture stream's (the pool's), whatever device is current. Not yet run on a GPU (issue 51):
    ``engine.cuda_graphs`` defaults to ``off``."""
    if not torch.cuda.is_available():
        return
    index = torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    try:
        torch._C._cuda_endAllocateToPool(index, pool)
    except (RuntimeError, TypeError):
        pass
    generator = torch.cuda.default_generators[index]
    try:
        generator.graphsafe_set_state(generator.clone_state())
    except (RuntimeError, AttributeError):
        pass


class AnchoredPool:
    """The run's CUDA graphs (``graphs.step_graph_maker``): one side stream, one memory pool, and an
    anchor graph captured into the pool first and held as long as this object. Each round's graphs are
    dropped before the next round captures; without a graph alive in between, the pool's use count falls
    to 0 and the next capture into it fails (torch 2.11 on an H200: the host allocator's
    ``use_count > 0`` assertion in ``capture_begin``, even with a ``torch.cuda.MemPool`` holding the
    device side; the device allocator asserts the same for a ``graph_pool_handle``). The anchor keeps the
    count at 1 or more on both sides, so a round's captures reuse the memory the last round's freed."""

    def __init__(self, device: torch.device, stream: Optional[torch.cuda.Stream] = None, pool: Any = None,
                 new_graph: Callable[[], Any] = torch.cuda.CUDAGraph) -> None:
        self.stream = torch.cuda.Stream(device) if stream is None else stream
        self.pool = torch.cuda.graph_pool_handle() if pool is None else pool
        self.new_graph = new_graph
        self.cell = torch.zeros(1, device=device)
        self.anchor = self()
        self.anchor.capture(lambda: self.cell.add_(1))

    def __call__(self) -> CudaStepGraph:
        return CudaStepGraph(self.stream, self.pool, self.new_graph)


Recorded = tuple[Any, tuple, dict, Any]
"""``(operation, args, kwargs, outputs)`` of one ATen call."""


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Recorded] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.calls.append((func, args, kwargs, out))
        return out


class TracedStepGraph:
    """The step as its recorded ATen operations, replayed on the recorded tensors."""

    runs_on_capture = True

    def __init__(self) -> None:
        self.calls: list[Recorded] = []

    def warmup(self, step: Callable[[], None]) -> None:
        step()

    def capture(self, step: Callable[[], None]) -> None:
        with _Recorder() as recorder:
            step()
        self.calls = recorder.calls

    def replay(self) -> None:
        """Re-run the recorded operations below autograd, where the recorder saw them."""
        with torch._C._AutoDispatchBelowADInplaceOrView():
            for func, args, kwargs, recorded in self.calls:
                fresh = func(*args, **kwargs)
                returns = func._schema.returns
                if not returns:
                    continue
                if len(returns) == 1:
                    recorded, fresh = (recorded,), (fresh,)
                for ret, old, new in zip(returns, recorded, fresh):
                    if ret.alias_info is None:
                        _write_into(old, new, func)


def _write_into(old: Any, new: Any, func: Any) -> None:
    """Put a fresh output's values into the recorded output's memory (host values stay frozen)."""
    if isinstance(old, torch.Tensor):
        if old.shape != new.shape:
            raise RuntimeError(f"{func} gave shape {tuple(new.shape)} on replay, {tuple(old.shape)} at capture: "
                               "the step's shapes depend on its data")
        old.copy_(new)
    elif isinstance(old, (list, tuple)):
        for a, b in zip(old, new):
            _write_into(a, b, func)
