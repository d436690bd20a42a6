"""The scalar settings of a simulation (resolved from the Hydra config)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunSettings:
    rounds: int
    clients_per_round: int
    batch_size: int
    lr: float
    schedule: Any
    seed: int
    eval_every: int
    augment: bool = False
    eval_batch_size: int = 128
    progress: bool = True
    checkpoint_every: int = 0
    channels_last: bool = False
    eval_statistics: str = "auto"
    threads: int = 0
    """torch threads of the run (``engine.threads``; 0: not set by the runner), in the summary."""
    cuda_graphs: str = "off"
    """``engine.cuda_graphs`` (``engine/graphs.py``)."""
    client_state_memory_mb: Any = "auto"
    """``engine.client_state_memory_mb`` (``engine/client_states.py``)."""
    count_macs: bool = False
    """Count the MACs of the first round's local training (``summary.json``: ``train_macs_per_round``)."""
    small_clients: str = "refuse"
    """``small_clients``: with ``cycle`` a client smaller than a batch trains one batch an epoch."""
    eval_clients: int | None = None
    """The clients whose own models an evaluation tests (personalized runs): at most this many,
    drawn per evaluation (``evaluation.clients``); ``None``: all."""
    eval_batched: bool = False
    """Evaluate the tested clients' models together (``metrics/client_batch.py``), not one at a time."""
    labels: dict[str, Any] = field(default_factory=dict)
    """Constant columns of every metrics row and keys of the summary (e.g. the Byzantine attack
    and defense of the run)."""
