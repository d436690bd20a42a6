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

from typing import Any, Callable, Protocol

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

    def __init__(self, stream: torch.cuda.Stream, pool: Any) -> None:
        self.graph = torch.cuda.CUDAGraph()
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
        capture may raise too, about the capture rather than its cause)."""
        def captured() -> None:
            self.graph.capture_begin(pool=self.pool)
            try:
                step()
            except BaseException:
                try:
                    self.graph.capture_end()
                except RuntimeError:
                    pass
                raise
            self.graph.capture_end()

        self.on_side_stream(captured)

    def replay(self) -> None:
        self.graph.replay()


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
