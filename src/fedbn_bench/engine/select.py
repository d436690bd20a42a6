"""Which backend trains the clients: ``engine=loop``, ``vmap``, ``packed`` or ``auto``.

``vmap`` and ``packed`` fall back to ``loop`` with a one-line warning naming the reason when the
combination is not supported: from what the algorithm and the norm method declare
(``Algorithm.stacked_unsupported``, ``NormMethod.unsupported_backends``) and, for ``packed``, from
the model's modules (packing rules and a self-check, ``backends/packed.py``).

``auto`` (the config's default) picks the fastest backend that supports the run, from measured
tables, and reports its choice (``EngineChoice``: ``summary.json``'s ``engine``, ``engine_requested``,
``engine_fallback``, and one line on the terminal):

* CUDA: ``packed``, else ``vmap``, else ``loop`` (``CUDA_ORDER``), the order of their speed on the
  one GPU measured, an NVIDIA H200 (torch 2.11.0+cu130, ``main`` at 02ecf67,
  ``results/bench/gpu_hbn_cifar10.csv``): hbn_cifar10 (Simple-CNN, B=4, 10 of 100 clients) at 0.699 s
  per round on ``packed``, 1.62 on ``vmap``, 4.50 on ``loop`` and 6.82 for the typical FL loop.
* CPU: ``packed`` when it supports the run and the local batch is at most ``PACKED_MAX_BATCH``
  (16), else ``loop`` (results/bench/README.md, ``scripts/bench.py``). Small batches are where a
  per-client loop wastes the CPU on per-call overhead and on kernels too small to run well: packed
  ran hbn_cifar10 (Simple-CNN, B=4) at 3.8x the typical loop, against 1.06x for ``loop`` (2 threads,
  AMD EPYC; 4.4x / 1.6x on the earlier Intel Xeon); at B=16 it was 3.6 vs 5.4 s per round for
  ``loop``. At large batches the per-client kernels are already efficient and one grouped kernel
  is not faster: packed took 1.27x ``loop``'s time on fbn_cifar10 (B=50) and 1.02x on fedbn_digits
  (B=32). ``vmap`` was slower than ``loop`` on every CPU preset except hbn_cifar10: functorch turns
  the stacked convolutions into NCHW grouped convolutions, the slow CPU kernels.
* One client per round (e.g. ``centralized``) uses ``loop`` everywhere: nothing to vectorize.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

import torch

from fedbn_bench.engine.backends import packed
from fedbn_bench.engine.backends.stacked import stack_unsupported_reason
from fedbn_bench.engine.federation import Federation

log = logging.getLogger("fedbn_bench")

SELF_CHECK_SAMPLES = 2
PACKED_MAX_BATCH = 16
"""Largest local batch for which ``auto`` picks ``packed`` on CPU (see the module docstring)."""


CUDA_ORDER = ("packed", "vmap")
"""``auto``'s preference on CUDA, fastest first (see the module docstring); ``loop`` after them."""


@dataclass(frozen=True)
class EngineChoice:
    """The backend that runs ``engine=requested`` and, when it is not the first one wanted (the
    one asked for, or ``auto``'s fastest), why (``fallback``)."""

    requested: str
    backend: str
    fallback: Optional[str] = None

    def record(self) -> dict[str, str]:
        """The choice as ``summary.json`` keeps it."""
        return {"engine": self.backend, "engine_requested": self.requested,
                **({"engine_fallback": self.fallback} if self.fallback else {})}

    def line(self) -> str:
        """The choice in one terminal line."""
        return f"engine={self.requested} runs on {self.backend}" + (f": {self.fallback}" if self.fallback else "")


def choose_engine(
    name: str,
    fed: Federation,
    batch_size: int,
    clients_per_round: int,
    device: torch.device,
    channels_last: bool = False,
) -> EngineChoice:
    """The backend that runs ``engine=name`` for this federation and why it is that one, logged in
    one line (a warning when ``vmap`` or ``packed`` was asked for and falls back to ``loop``)."""
    if name == "auto":
        choice = auto_choice(fed, batch_size, clients_per_round, device)
        log.info(choice.line())
        return choice
    reason = None if name == "loop" else unsupported_reason(name, fed)
    choice = EngineChoice(name, "loop" if reason else name, reason)
    if reason:
        log.warning(choice.line())
    elif name != "loop" and channels_last:
        log.warning("engine.channels_last is ignored by engine=%s (%s)", name, {
            "vmap": "functorch cannot batch channels-last tensors",
            "packed": "it runs image inputs channels-last always"}[name])
    return choice


def select_engine(name: str, fed: Federation, batch_size: int, clients_per_round: int, device: torch.device,
                  channels_last: bool = False) -> str:
    """The backend (``loop``, ``vmap`` or ``packed``) that runs ``engine=name`` (``choose_engine``)."""
    return choose_engine(name, fed, batch_size, clients_per_round, device, channels_last).backend


def auto_choice(fed: Federation, batch_size: int, clients_per_round: int, device: torch.device) -> EngineChoice:
    """``engine=auto``: the first backend of the device's order that supports the run (module docstring)."""
    if min(clients_per_round, fed.num_clients) < 2:
        return EngineChoice("auto", "loop", "one client per round, nothing to stack")
    if device.type == "cuda":
        wanted = CUDA_ORDER
    elif batch_size <= PACKED_MAX_BATCH:
        wanted = ("packed",)
    else:
        return EngineChoice("auto", "loop", f"local batch {batch_size} > {PACKED_MAX_BATCH}, where packed is "
                                            "not faster than loop on CPU")
    reasons = []
    for backend in wanted:
        reason = unsupported_reason(backend, fed)
        if reason is None:
            return EngineChoice("auto", backend, "; ".join(reasons) or None)
        reasons.append(f"not {backend} ({reason})")
    return EngineChoice("auto", "loop", "; ".join(reasons))


def unsupported_reason(backend: str, fed: Federation) -> Optional[str]:
    """Why ``backend`` (``vmap`` or ``packed``) cannot run this federation, or ``None``."""
    reason = stack_unsupported_reason(fed.norm, fed.algo, fed.model, backend)
    if reason or backend == "vmap":
        return reason
    return packed.unsupported_reason(fed.model, fed.data.train.x[:SELF_CHECK_SAMPLES])
