"""One simulation, wired from its parts (each with one job):

* ``ClientStore`` (``clients.py``): global state, the clients' own state and records;
* a backend (``backends/``): local training, ``loop``, ``vmap`` or ``packed``;
* ``RoundRunner`` (``round.py``): the round pipeline (broadcast, train, transforms, aggregate);
* ``Evaluator`` (``evaluator.py``): the metric list (``metrics/``);
* ``RunLoop`` (``run_loop.py``): cadence, divergence, records, checkpoints, summary.
"""
from __future__ import annotations

import logging
from typing import Any, Optional, Sequence

import torch

from fedbn_bench.core.aggregation import Aggregator
from fedbn_bench.core.transforms import UpdateTransform
from fedbn_bench.engine.backends.base import Backend, TrainingContext
from fedbn_bench.engine.backends.loop import LoopBackend
from fedbn_bench.engine.backends.packed import PackedBackend
from fedbn_bench.engine.backends.vmap import VmapBackend
from fedbn_bench.engine.client_states import StateMemory, memory_limit_bytes
from fedbn_bench.engine.clients import ClientStore
from fedbn_bench.engine.evaluator import Evaluator
from fedbn_bench.engine.federation import Federation
from fedbn_bench.engine.graphs import CAPTURED, GraphRecord, graph_status, status_line
from fedbn_bench.engine.options import to_channels_last
from fedbn_bench.engine.round import RoundRunner
from fedbn_bench.engine.run_loop import RunLoop
from fedbn_bench.engine.select import EngineChoice
from fedbn_bench.engine.settings import RunSettings
from fedbn_bench.metrics.base import METRICS, Metric
from fedbn_bench.records.loggers import Logger
from fedbn_bench.records.run_records import RunRecorder

log = logging.getLogger(__name__)

BACKENDS: dict[str, type[Backend]] = {"loop": LoopBackend, "vmap": VmapBackend, "packed": PackedBackend}


def default_metrics(personalized: bool) -> list[Metric]:
    """Each client's own model (per client, per domain, averaged over domains; FedBN §5) when the
    clients keep state that changes evaluation, else the global model overall and per domain;
    both add validation columns when the clients hold a validation split."""
    names = ["client_accuracy"] if personalized else ["global_accuracy", "domain_accuracy"]
    return [METRICS.get(name)() for name in names]


def distinct(metrics: Sequence[Metric]) -> list[Metric]:
    """``metrics`` without repeats (the first one stays): a metric repeats another when it has the
    same class and the same options (e.g. ``robust_accuracy`` both asked for and added for an
    adversarial run); one metric with two sets of options (two layers) is two metrics."""
    seen: set[tuple[type, str]] = set()
    out = []
    for m in metrics:
        key = (type(m), repr(sorted(vars(m).items())))
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out


class Simulation:
    """Runs the rounds of one federated simulation and writes its records."""

    def __init__(self, fed: Federation, settings: RunSettings, recorder: RunRecorder, logger: Logger,
                 engine: str | EngineChoice = "loop", config: Optional[dict[str, Any]] = None, aggregator: Optional[Aggregator] = None,
                 transforms: Sequence[UpdateTransform] = (), extra_metrics: Sequence[Metric] = (),
                 statistics_aggregator: Optional[Aggregator] = None) -> None:
        """``engine`` is ``loop``, ``vmap`` or ``packed`` (already checked), or the ``EngineChoice``
        that picked it (``select.py``; its record goes into the summary);
        ``config`` (the resolved run config) is stored in checkpoints to check a resumption;
        ``extra_metrics`` are evaluated after the default ones (``default_metrics``)."""
        self.fed, self.s = fed, settings
        choice = engine if isinstance(engine, EngineChoice) else EngineChoice(engine, engine)
        engine = choice.backend
        model, algo, norm = fed.model, fed.algo, fed.norm
        if settings.channels_last and engine == "loop":
            to_channels_last(model)
        state = model.state_dict()
        local_keys = list(state) if algo.keeps_models_local else norm.local_keys(model)
        shared = norm.shares_local_keys and not algo.keeps_models_local
        algo.local_keys = frozenset() if shared or algo.keeps_models_local else frozenset(local_keys)
        memory = StateMemory(memory_limit_bytes(settings.client_state_memory_mb), recorder.run_dir)
        self.store = ClientStore(state, local_keys, fed.clients, local_from_global=shared, memory=memory)
        self.personalized = bool(local_keys) and (algo.keeps_models_local or norm.local_state_in_evaluation)
        batch_size = algo.batch_size(settings.batch_size, settings.clients_per_round)
        adversarial = fed.adversarial is not None and fed.adversarial.active
        device = next(model.parameters()).device
        graphs = graph_status(settings.cuda_graphs, device, engine, adversarial)
        log.info(status_line(settings.cuda_graphs, graphs))
        self.graph_record = GraphRecord(graphs)
        context = TrainingContext(model, norm, algo, fed.data.train, local_keys, batch_size, fed.num_clients,
                                  settings.augment, settings.channels_last, shared, fed.adversarial,
                                  settings.cuda_graphs if graphs == CAPTURED else None, self.graph_record)
        self.engine = engine
        self.backend = BACKENDS[engine](context)
        self.rounds = RoundRunner(fed, self.store, self.backend, settings, aggregator or Aggregator(), transforms,
                                  statistics_aggregator)
        robust = [METRICS.get("robust_accuracy")()] if adversarial else []
        metrics = distinct([*default_metrics(self.personalized), *extra_metrics, *robust])
        follows = self.personalized and fed.client_test_split is not None
        self.evaluator = Evaluator(fed, self.store, metrics, settings.eval_batch_size, settings.seed, batch_size,
                                   clients=settings.eval_clients, batched=settings.eval_batched and self.personalized,
                                   client_test=fed.client_test_split if follows else None)
        self.loop = RunLoop(fed, self.store, self.rounds, self.evaluator, settings, recorder, logger, config,
                            choice.record(), self.graph_record)

    def run_round(self, round_idx: int) -> Optional[torch.Tensor]:
        return self.rounds.run_round(round_idx)

    def run(self) -> dict[str, Any]:
        return self.loop.run()

    def restore(self, state: dict[str, Any]) -> None:
        self.loop.restore(state)
