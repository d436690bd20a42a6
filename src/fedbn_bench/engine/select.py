"""Which backend trains the clients: ``engine=loop``, ``vmap``, ``packed`` or ``auto``.

``vmap`` and ``packed`` fall back to ``loop`` with a one-line warning naming the reason when the
combination of norm method, algorithm and model is not supported (``vmap.unsupported_reason``,
``packed.unsupported_reason``).

``auto`` rule, from the measurements in results/bench/README.md (``scripts/bench.py``, CPU):

* CPU: ``packed`` when it supports the run, else ``loop``. On hbn_cifar10 packed was the fastest
  backend (see the table there); ``vmap`` was slower than ``loop`` on every preset, because
  functorch turns the stacked convolutions into NCHW grouped convolutions, the slow CPU kernels.
* CUDA: ``vmap`` when it supports the run (one kernel launch per layer for all clients instead of
  one per client). Not measured: no session had a GPU; run ``scripts/bench.py --device cuda`` to
  confirm or revise.
* One client per round (e.g. ``centralized``) uses ``loop`` everywhere: nothing to vectorize.
"""
from __future__ import annotations

import logging
from typing import Optional

import torch

from fedbn_bench.engine import packed, vmap
from fedbn_bench.engine.simulation import Federation

log = logging.getLogger("fedbn_bench")

SELF_CHECK_SAMPLES = 2


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
        if min(clients_per_round, len(fed.client_indices)) < 2:
            return "loop"
        wanted = "vmap" if device.type == "cuda" else "packed"
        return wanted if unsupported_reason(wanted, fed, batch_size) is None else "loop"
    reason = unsupported_reason(name, fed, batch_size)
    if reason:
        log.warning("engine=%s falls back to engine=loop: %s", name, reason)
        return "loop"
    if channels_last:
        log.warning("engine.channels_last is ignored by engine=%s (%s)", name, {
            "vmap": "functorch cannot batch channels-last tensors",
            "packed": "it runs image inputs channels-last always"}[name])
    return name


def unsupported_reason(backend: str, fed: Federation, batch_size: int) -> Optional[str]:
    """Why ``backend`` (``vmap`` or ``packed``) cannot run this federation, or ``None``."""
    if backend == "vmap":
        steps = [fed.algo.num_steps(len(indices), batch_size) for indices in fed.client_indices]
        return vmap.unsupported_reason(fed.norm, fed.algo, fed.model, steps)
    return packed.unsupported_reason(fed.norm, fed.algo, fed.model, fed.data.train.x[:SELF_CHECK_SAMPLES])
