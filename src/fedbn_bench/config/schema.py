"""Structured-config schemas (dataclasses registered in Hydra's ConfigStore).

Every config group has a schema, so a misspelt key or a wrongly typed value fails while Hydra
composes the config, naming the key, before any data is loaded. The fixed groups are typed by the
top-level ``Config``; partitions, norm methods and algorithms carry their own schema class (see
``partition/``, ``norms/`` and ``algorithms/``) and are stored as ``schema/partition/<name>``,
``schema/norm/<name>`` and ``schema/algo/<name>``; each YAML of those groups starts with
``defaults: [/schema/<group>/<name>@_here_]``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from omegaconf import MISSING
from fedbn_bench.adversarial.training import AdversarialConfig
from fedbn_bench.robust.byzantine import ByzantineConfig


@dataclass
class DatasetConfig:
    name: str = MISSING
    root: str = "data"
    download: bool = False
    augment: bool = False
    num_domains: int = 0
    eval_batch_size: Optional[int] = None
    """Test batch size; ``None``: 128 on the CPU (cache-sized batches evaluate fastest there,
    ``results/bench/README.md``) and 1024 on CUDA."""
    test_samples: Optional[int] = None
    """Evaluate on a seeded random subset of at most this many test samples (``debug=default``: a
    few seconds on any dataset); ``None``: the whole test set."""
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class ModelConfig:
    name: str = MISSING
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class EngineConfig:
    """Backend of local training (``engine/select.py``) and its optional speed switch
    (``engine/options.py``, off by default)."""

    name: str = "loop"
    channels_last: bool = False
    threads: Any = "auto"
    cuda_graphs: str = "off"
    client_state_memory_mb: Any = "auto"


@dataclass
class LoggerConfig:
    name: str = "wandb"
    project: str = "fedbn-bench"
    entity: Optional[str] = None
    mode: str = "offline"
    group: Optional[str] = None
    tags: list[str] = field(default_factory=list)


@dataclass
class EvaluationConfig:
    """``evaluation``: how a run that tests each client's own model picks the clients (``clients``:
    a number, or ``all``), their test data (``client_test``) and whether they run together (``batched``)."""

    clients: Any = 100
    client_test: str = "partition"
    batched: bool = False


@dataclass
class Config:
    dataset: DatasetConfig = MISSING
    partition: Any = MISSING
    model: ModelConfig = MISSING
    norm: Any = MISSING
    algo: Any = MISSING
    aggregator: Any = MISSING
    byzantine: ByzantineConfig = MISSING
    adversarial: AdversarialConfig = MISSING
    transforms: list[Any] = field(default_factory=list)
    metrics: list[Any] = field(default_factory=list)
    engine: EngineConfig = MISSING
    logger: LoggerConfig = MISSING
    seed: int = 0
    replicas: int = 1
    rounds: int = 50
    num_clients: int = 10
    clients_per_round: int = 10
    batch_size: int = 32
    small_clients: str = "auto"
    lr: float = 0.05
    alpha: float = 0.5
    gamma: float = 0.5
    dirichlet_scheme: str = "per_class"
    crop_padding: int = 4
    eval_every: int = 5
    eval_statistics: str = "auto"
    val_fraction: float = 0.0
    client_test: str = "domain"
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    count_macs: bool = False
    device: str = "auto"
    progress: bool = True
    checkpoint_every: int = 5
    resume: Optional[str] = None
    overwrite: bool = False
    record: bool = False


@dataclass
class ProcessLauncherConfig:
    """``hydra/launcher=processes``: fedbn-bench's local launcher, each job in a process of its own
    (``hydra_plugins/fedbn_bench_launcher/process_launcher.py``), so one killed job does not end the
    sweep: ``n_jobs`` jobs at once (<= 0: every core but ``-n_jobs - 1``, as joblib reads it), spread
    over ``gpus`` (``auto``: the node's; a list of device ids; ``null``: none) with at most
    ``jobs_per_gpu`` on one GPU. Also stored as ``hydra/launcher=joblib``, the name it replaced the
    joblib plugin's launcher under, so that existing commands keep working."""
    _target_: str = "hydra_plugins.fedbn_bench_launcher.process_launcher.ProcessLauncher"
    n_jobs: int = -1
    gpus: Any = "auto"
    jobs_per_gpu: int = 1


def register_schemas() -> None:
    """Store every schema in Hydra's ConfigStore (idempotent), and ``ProcessLauncherConfig`` as
    ``hydra/launcher/processes`` and as ``hydra/launcher/joblib`` over the joblib plugin's entry (the
    plugins are scanned first: they store theirs)."""
    from fedbn_bench.algorithms import ALGORITHMS
    from fedbn_bench.core.aggregation import AGGREGATORS
    from fedbn_bench.norms import NORMS
    from fedbn_bench.partition import PARTITIONS

    Plugins.instance()
    cs = ConfigStore.instance()
    cs.store(name="config_schema", node=Config)
    for name in ("processes", "joblib"):
        cs.store(group="hydra/launcher", name=name, node=ProcessLauncherConfig, provider="fedbn_bench")
    cs.store(group="schema", name="byzantine", node=ByzantineConfig)
    cs.store(group="schema", name="adversarial", node=AdversarialConfig)
    for name, partition in PARTITIONS.items():
        cs.store(group="schema/partition", name=name, node=partition.schema)
    for name in NORMS.names():
        cs.store(group="schema/norm", name=name, node=NORMS.get(name).config_class)
    for name in ALGORITHMS.names():
        cs.store(group="schema/algo", name=name, node=ALGORITHMS.get(name).config_class)
    for name in AGGREGATORS.names():
        cs.store(group="schema/aggregator", name=name, node=AGGREGATORS.get(name).config_class)
