"""``engine.cuda_graphs``: whether the local step may run as a captured CUDA graph, and why not.

A CUDA graph replays a recorded sequence of kernels with no host work per operation (issue 42
§2: a packed step of HBN's Simple-CNN is bound by the host issuing ~150 operations). Replay is
only correct for a step that

* runs on a CUDA device;
* never waits for the device (no ``.item()``, no data-dependent shapes): a synchronisation in a
  captured region is an error, and a value read on the host would be frozen at capture time;
* keeps its shapes and buffers from step to step: the stacked backends compute only the clients
  still training (``stacked.py``), so a round whose clients take unequal numbers of steps
  changes the step's shape when the first client finishes.

``fallback_reason`` applies these rules in that order and names the first that fails, in one
line; ``SyncProbe`` finds synchronising operations by running a step under it (on any device:
the operations are the same). The randomness the step needs is on the device already: batches
and their augmentation are drawn once per round (``engine/sampling.py``: device-side
``random_crop_flip`` with a generator on the data's device), dropout from torch's device
generator. The capture itself is not written yet, so every run's local steps are eager; the
run names why (``run_reason``: a rule that fails before training, else ``NO_CAPTURE_PATH``).
"""
from __future__ import annotations

from typing import Any, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from fedbn_bench.errors import ConfigError

GRAPH_MODES = ("auto", "on", "off")
SYNCHRONISING = frozenset({
    "_local_scalar_dense", "nonzero", "masked_select", "equal", "is_nonzero", "_unique", "_unique2",
    "unique_dim", "unique_consecutive", "bincount", "histc",
})
"""ATen operations that read a device value on the host (``.item()``, ``bool(t)``) or give an
output whose shape depends on values."""
NO_CAPTURE_PATH = "the graph capture of the local step is not written yet (issue 42 §2)"


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


def fallback_reason(mode: str, device: torch.device, synchronising: list[str], step_counts: list[int]) -> Optional[str]:
    """Why the local steps run eagerly (the first rule that fails, one line), or ``None`` when
    they may be captured: ``synchronising`` are the operations a ``SyncProbe`` saw in a step,
    ``step_counts`` the local steps of each client of the round."""
    if mode == "off":
        return "engine.cuda_graphs=off"
    if device.type != "cuda":
        return "not a CUDA device"
    if synchronising:
        return f"the local step synchronises with the host ({', '.join(sorted(set(synchronising)))})"
    if len(set(step_counts)) > 1:
        return "the clients take unequal numbers of local steps, so the step's shape changes"
    return None


def run_reason(mode: str, device: torch.device) -> str:
    """Why a run's local steps are eager, from what is known before training."""
    return fallback_reason(mode, device, [], []) or NO_CAPTURE_PATH
