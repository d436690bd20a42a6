"""What every backend receives and returns: one ``ClientJob`` per sampled client in, one
``ClientResult`` per client out, nothing else mutated (the round runner stores the results)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch import nn

from fedbn_bench.adversarial.training import AdversarialTraining
from fedbn_bench.algorithms.base import Algorithm
from fedbn_bench.core.roles import STANDARD
from fedbn_bench.core.updates import ClientUpdate, State, Statistics
from fedbn_bench.data import Split
from fedbn_bench.engine.graphs import GraphRecord
from fedbn_bench.norms.base import NormMethod


@dataclass
class ClientJob:
    """One client's local training of one round: what it starts from (``start``, the
    algorithm's broadcast, then its ``local`` keys), its algorithm state, its data and steps, and
    its run's ``seed`` (batches and augmentations draw from ``(seed, round, client)``). A job
    names its own data split and seed, so one backend call may train the clients of several runs
    (``engine/replicas.py``)."""

    client: int
    start: State
    local: State
    algo_state: dict[str, Any]
    data: Split
    indices: torch.Tensor
    steps: int
    seed: int
    strata: Optional[list[int]] = None
    role: str = STANDARD


@dataclass
class ClientResult:
    """The client's upload, and what it keeps: its local keys and its algorithm state."""

    update: ClientUpdate
    local: State
    algo_state: dict[str, Any]


@dataclass
class TrainingContext:
    """What a backend needs about the run."""

    model: nn.Module
    norm: NormMethod
    algo: Algorithm
    train: Split
    """The run's training split (its layout; each job names the split it draws from)."""
    local_keys: list[str]
    batch_size: int
    num_clients: int
    augment: bool = False
    channels_last: bool = False
    uploads_local_keys: bool = False
    """Whether the local keys are uploaded too (``NormMethod.shares_local_keys``)."""
    adversarial: Optional[AdversarialTraining] = None
    """The training objective by user role (``adversarial/training.py``)."""
    cuda_graphs: Optional[str] = None
    """``engine.cuda_graphs`` when the run's local steps may be captured (``graphs.run_reason``
    found nothing against it), else ``None``: every step eager."""
    graph_record: Optional[GraphRecord] = None
    """What the captured steps did, round by round (``graphs.GraphRecord``), where ``cuda_graphs`` is set."""


class Backend:
    """Trains a round's clients; subclasses implement ``train``."""

    def __init__(self, ctx: TrainingContext) -> None:
        self.ctx = ctx

    def train(self, jobs: list[ClientJob], round_idx: int, lr: float) -> list[ClientResult]:
        raise NotImplementedError

    def load(self, job: ClientJob) -> None:
        model = self.ctx.model
        model.load_state_dict(job.start)
        if job.local:
            model.load_state_dict(job.local, strict=False)

    def result(self, job: ClientJob, upload: State, extras: dict[str, State], algo_state: dict[str, Any],
               statistics: Statistics, local: State, loss: torch.Tensor) -> ClientResult:
        """The client's result, with every key its norm keeps local removed from the upload
        (unless the norm shares them)."""
        keys = set() if self.ctx.uploads_local_keys else set(self.ctx.local_keys)
        shared = {k: v for k, v in upload.items() if k not in keys}
        extras = {name: {k: v for k, v in state.items() if k not in keys} for name, state in extras.items()}
        update = ClientUpdate(job.client, shared, statistics, extras, len(job.indices), loss)
        return ClientResult(update, local, algo_state)
