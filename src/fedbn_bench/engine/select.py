"""Which backend trains the clients: ``engine=loop``, ``vmap``, ``packed`` or ``auto``.

``vmap`` and ``packed`` fall back to ``loop`` with a one-line warning naming the reason when the
combination is not supported: from what the algorithm and the norm method declare
(``Algorithm.stacked_unsupported``, ``NormMethod.unsupported_backends``) and, for ``packed``, from
the model's modules (packing rules and a self-check, ``backends/packed.py``).

``auto`` rule, from the measurements in results/bench/README.md (``scripts/bench.py``, CPU):

* CPU: ``packed`` when it supports the run and the local batch is at most ``PACKED_MAX_BATCH``
  (16), else ``loop``. Small batches are where a per-client loop wastes the CPU on per-call
  overhead and on kernels too small to run well: packed ran hbn_cifar10 (Simple-CNN, B=4) at
  3.8x the typical loop, against 1.06x for ``loop`` (2 threads, AMD EPYC; 4.4x / 1.6x on the earlier
  Intel Xeon); at B=16 it was 3.6 vs 5.4 s per round for ``loop``. At large batches the per-client
  kernels are already efficient and one grouped kernel is not faster: packed took 1.27x ``loop``'s
  time on fbn_cifar10 (B=50) and 1.02x on fedbn_digits (B=32). ``vmap`` was slower than ``loop``
  on every CPU preset except hbn_cifar10: functorch turns the stacked convolutions into NCHW
  grouped convolutions, the slow CPU kernels.
* CUDA: ``vmap`` when it supports the run (one kernel launch per layer for all clients instead of
  one per client). Not measured: no session had a GPU; run ``scripts/bench.py --device cuda`` to
  confirm or revise.
* One client per round (e.g. ``centralized``) uses ``loop`` everywhere: nothing to vectorize.
"""
from __future__ import annotations

import logging
from typing import Optional

import torch

from fedbn_bench.engine.backends import packed
from fedbn_bench.engine.backends.stacked import stack_unsupported_reason
from fedbn_bench.engine.federation import Federation

log = logging.getLogger("fedbn_bench")

SELF_CHECK_SAMPLES = 2
PACKED_MAX_BATCH = 16
"""Largest local batch for which ``auto`` picks ``packed`` on CPU (see the module docstring)."""


def select_engine(
    name: str,
    fed: Federation,
    batch_size: int,
    clients_per_round: int,
    device: torch.device,
    channels_last: bool = False,
) -> str:
    """The backend (``loop``, ``vmap`` or ``packed``) that runs ``engine=name`` for this federation."""
    if name == "loop":
        return "loop"
    if name == "auto":
        if min(clients_per_round, fed.num_clients) < 2:
            return "loop"
        if device.type == "cuda":
            wanted = "vmap"
        elif batch_size <= PACKED_MAX_BATCH:
            wanted = "packed"
        else:
            return "loop"
        return wanted if unsupported_reason(wanted, fed) is None else "loop"
    reason = unsupported_reason(name, fed)
    if reason:
        log.warning("engine=%s falls back to engine=loop: %s", name, reason)
        return "loop"
    if channels_last:
        log.warning("engine.channels_last is ignored by engine=%s (%s)", name, {
            "vmap": "functorch cannot batch channels-last tensors",
            "packed": "it runs image inputs channels-last always"}[name])
    return name


def unsupported_reason(backend: str, fed: Federation) -> Optional[str]:
    """Why ``backend`` (``vmap`` or ``packed``) cannot run this federation, or ``None``."""
    reason = stack_unsupported_reason(fed.norm, fed.algo, fed.model, backend)
    if reason or backend == "vmap":
        return reason
    return packed.unsupported_reason(fed.model, fed.data.train.x[:SELF_CHECK_SAMPLES])
