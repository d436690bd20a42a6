"""Builds one experiment from a composed config and runs it: the body of ``run.py``.

Order matters for the bad-input promise: every check that can fail on user input (config ranges,
dataset root, partition feasibility, batch size vs client data) runs before the first round.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import logging
import shutil
from pathlib import Path
from typing import Any, Iterator

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from fedbn_bench.adversarial.pixels import PixelSpace
from fedbn_bench.adversarial.roles import assign_roles
from fedbn_bench.adversarial.training import ADVERSARIAL_TRAINING, AdversarialTraining
from fedbn_bench.algorithms import Algorithm, build_algorithm
from fedbn_bench.core.roles import STANDARD
from fedbn_bench.config.validate import (CLIENT_TEST, small_clients_policy, validate_client_sizes, validate_config,
                                         validate_validation_split)
from fedbn_bench.data import DatasetBundle, dataset_has_natural_domains, load_dataset
from fedbn_bench.engine.checkpoint import config_differences, load_checkpoint
from fedbn_bench.core.aggregation import AGGREGATORS
from fedbn_bench.core.transforms import TRANSFORMS
from fedbn_bench.engine.replicas import ReplicaGroup
from fedbn_bench.engine.federation import ClientRecord, Federation, hold_out_validation
from fedbn_bench.engine.select import choose_engine
from fedbn_bench.engine.settings import RunSettings
from fedbn_bench.engine.simulation import Simulation
from fedbn_bench.engine.client_states import memory_limit_bytes
from fedbn_bench.engine.graphs import check_mode
from fedbn_bench.engine.threads import apply_threads
from fedbn_bench.engine.run_loop import failure_record
from fedbn_bench.errors import ConfigError, UserError
from fedbn_bench.metrics import build_metric
from fedbn_bench.models import build_model
from fedbn_bench.norms import NormMethod, build_norm
from fedbn_bench.partition import follow_partition, make_partition, partition_params, partition_table
from fedbn_bench.records.atomic import atomic_write_text
from fedbn_bench.records.loggers import make_logger, wandb_login_missing
from fedbn_bench.records.run_dirs import STAGED, record_unfinished, start_over
from fedbn_bench.records.run_records import RunRecorder
from fedbn_bench.robust.byzantine import build_byzantine, byzantine_labels

log = logging.getLogger("fedbn_bench")


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device='cuda' but no CUDA device is available; use device=cpu or device=auto")
    return torch.device(name)


def load_data(cfg: DictConfig) -> DatasetBundle:
    d = cfg.dataset
    num_domains = d.num_domains
    if cfg.partition.name == "domains" and num_domains == 0 and not dataset_has_natural_domains(d.name):
        num_domains = cfg.partition.num_domains  # synthetic shifts only for data without its own domains
    data = load_dataset(d.name, root=d.root, download=d.download, seed=cfg.seed, num_domains=num_domains, **d.options)
    if d.test_samples is not None and d.test_samples < len(data.test):
        draw = torch.randperm(len(data.test), generator=torch.Generator().manual_seed(cfg.seed))
        data = dataclasses.replace(data, test=data.test.take(draw[:d.test_samples].sort().values))
    return data



def domain_test_splits(data: DatasetBundle, client_domains: list[int],
                       client_test: str = "domain") -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """Per-client test indices and per-domain test indices. ``client_test``: ``domain``, each
    client tests on its domain's whole test set (FedBN §5); ``shard``, the domain's test set cut
    into contiguous equal parts, one per client of the domain in client order (FedRBN's code: a
    1/10 shard per Digits user)."""
    if client_test not in CLIENT_TEST:
        raise ConfigError(f"client_test='{client_test}' is unknown; allowed: {', '.join(CLIENT_TEST)}")
    domain = data.test.domain
    per_domain = {name: torch.nonzero(domain == d).flatten() for d, name in enumerate(data.domain_names)}
    names = list(per_domain)
    if client_test == "domain":
        return [per_domain[names[d]] for d in client_domains], per_domain
    members = {d: [c for c, cd in enumerate(client_domains) if cd == d] for d in set(client_domains)}
    shards = {d: torch.tensor_split(per_domain[names[d]], len(clients)) for d, clients in members.items()}
    return [shards[d][members[d].index(c)] for c, d in enumerate(client_domains)], per_domain


def prepared_model(model_cfg: Any, norm: NormMethod, algo: Algorithm, input_shape: tuple[int, ...],
                   num_classes: int) -> nn.Module:
    """``model_cfg``'s architecture with the norm's layers, adapted by the norm and then by the
    algorithm (``prepare_model`` of each)."""
    model = build_model(model_cfg.name, norm.norm_layer, input_shape, num_classes, **model_cfg.options)
    return algo.prepare_model(norm.prepare_model(model))


def build_adversarial(cfg: Any, data: DatasetBundle, norm: NormMethod) -> AdversarialTraining:
    """The training objective ``adversarial=<name>``, attacking in the data's pixel space
    (``pixel_space: dataset``) or in model units (the official FedRBN code on Digits)."""
    channels = data.input_shape[0]
    space = (PixelSpace.of(data.norm_mean, data.norm_std, channels) if cfg.pixel_space == "dataset"
             else PixelSpace.of(None, None, channels))
    adversarial = ADVERSARIAL_TRAINING.get(cfg.name)(cfg, space)
    adversarial.validate(norm)
    return adversarial


def build_federation(cfg: DictConfig, device: torch.device) -> tuple[Federation, Any]:
    data = load_data(cfg)
    p = cfg.partition
    parts = make_partition(p.name, data.train.y, cfg.num_clients, cfg.seed, domains=data.train.domain,
                           **partition_params(p))
    table = partition_table(data.train.y, parts, data.num_classes)
    norm = build_norm(cfg.norm)
    algo = build_algorithm(cfg.algo)
    batch_size = algo.batch_size(cfg.batch_size, cfg.clients_per_round)
    clients = [torch.cat(parts)] if algo.pools_clients else parts
    strata = [len(p) for p in parts] if algo.pools_clients and algo.pools_by_client else None
    if strata:  # the union of one batch of every client (FBN Remark 4.1)
        if cfg.clients_per_round < cfg.num_clients or cfg.val_fraction:
            raise ConfigError(f"algo={cfg.algo.name} draws one batch of every client: it needs clients_per_round = "
                              "num_clients and no val_fraction; set algo.union_draw=uniform otherwise")
        validate_client_sizes(strata, cfg.batch_size, needs_two=False)
    val: list = [None] * len(clients)
    if cfg.val_fraction:
        split = [hold_out_validation(c, cfg.val_fraction, cfg.seed, i) for i, c in enumerate(clients)]
        validate_validation_split([len(c) for c in clients], [len(t) for t, _ in split], batch_size, cfg.val_fraction)
        clients, val = [train for train, _ in split], [held_out for _, held_out in split]
    validate_client_sizes([len(c) for c in clients], batch_size, needs_two=norm.uses_batch_statistics,
                          small_clients=small_clients_policy(cfg.small_clients, cfg.num_clients))
    model = prepared_model(cfg.model, norm, algo, data.input_shape, data.num_classes)
    adversarial = build_adversarial(cfg.adversarial, data, norm)
    client_test: list = [None] * len(clients)
    domains: list = [None] * len(clients)
    domain_test: dict[str, torch.Tensor] = {}
    if data.num_domains and p.name == "domains" and not algo.pools_clients:
        domains = [int(data.train.domain[c[0]]) for c in parts]
        client_test, domain_test = domain_test_splits(data, domains, cfg.client_test)
    elif data.num_domains:
        domain_test = domain_test_splits(data, [])[1]
    roles = [STANDARD] * len(clients)
    if adversarial.active:
        a = cfg.adversarial
        roles = assign_roles(domains, data.domain_names or [], a.at_fraction, a.at_domains, a.domain_order)
    data = data.to(device)
    records = [ClientRecord(indices=c.to(device), test_indices=None if t is None else t.to(device),
                            val_indices=None if v is None else v.to(device), domain=d, role=r, strata=strata)
               for c, t, v, d, r in zip(clients, client_test, val, domains, roles)]
    follow = None
    if cfg.evaluation.client_test == "partition" and all(t is None for t in client_test) and not algo.pools_clients:
        follow = [t.to(device) for t in follow_partition(data.train.y, parts, data.test.y, data.num_classes,
                                                        torch.Generator().manual_seed(cfg.seed))]
    fed = Federation(data=data, clients=records, model=model.to(device), norm=norm, algo=algo,
                     domain_test={k: v.to(device) for k, v in domain_test.items()}, adversarial=adversarial,
                     client_test_split=follow)
    return fed, table


def evaluation_settings(cfg: DictConfig, fed: Federation) -> dict[str, Any]:
    """``RunSettings``' evaluation fields from ``evaluation``: how many clients an evaluation
    tests (``None``: all) and whether their models run together (``batched``)."""
    e = cfg.evaluation
    clients = None if e.clients == "all" or e.clients >= fed.num_clients else int(e.clients)
    return {"eval_clients": clients, "eval_batched": bool(e.batched)}


def build_simulation(cfg: DictConfig, run_dir: str | Path, device: torch.device, config: dict[str, Any]) -> Simulation:
    """The simulation of ``cfg`` (validated), writing its records to ``run_dir``: its parts, the
    Byzantine attack and defense, its partition record, settings, logger and engine (nothing run)."""
    aggregator = AGGREGATORS.get(cfg.aggregator.name)(cfg.aggregator)
    attack, aggregator, statistics_aggregator = build_byzantine(cfg.byzantine, cfg.num_clients, cfg.clients_per_round,
                                                                cfg.seed, aggregator)
    for rule in (aggregator, statistics_aggregator):
        rule.check(cfg.clients_per_round)
    transforms = [TRANSFORMS.get(t.name)(t) for t in cfg.transforms] + ([attack] if attack else [])
    metrics = [build_metric(entry) for entry in OmegaConf.to_container(cfg.metrics, resolve=True)]
    torch.manual_seed(cfg.seed)
    fed, table = build_federation(cfg, device)
    if cfg.overwrite and not cfg.resume:
        start_over(run_dir)
    elif cfg.overwrite:  # a requeued job (SLURM keeps its overrides): it continues its checkpoint
        shutil.rmtree(Path(run_dir) / STAGED, ignore_errors=True)
    recorder = RunRecorder(run_dir)
    recorder.write_partition(table)
    settings = RunSettings(
        rounds=cfg.rounds,
        clients_per_round=cfg.clients_per_round,
        batch_size=cfg.batch_size,
        lr=cfg.algo.lr,
        schedule=cfg.algo.schedule,
        seed=cfg.seed,
        eval_every=cfg.eval_every,
        augment=cfg.dataset.augment,
        eval_batch_size=cfg.dataset.eval_batch_size or (1024 if device.type == "cuda" else 128),
        progress=cfg.progress,
        checkpoint_every=cfg.checkpoint_every,
        channels_last=cfg.engine.channels_last,
        eval_statistics=cfg.eval_statistics,
        cuda_graphs=cfg.engine.cuda_graphs,
        client_state_memory_mb=cfg.engine.client_state_memory_mb,
        count_macs=cfg.count_macs,
        labels=byzantine_labels(cfg.byzantine),
        small_clients=small_clients_policy(cfg.small_clients, cfg.num_clients),
        **evaluation_settings(cfg, fed),
    )
    swept = [tag for tag in cfg.logger.tags if "=" in tag]  # a sweep's values (records/sweep_labels.py)
    name = " ".join([f"{cfg.norm.name}-{cfg.algo.name}-{cfg.partition.name}-s{cfg.seed}", ",".join(swept)]).strip()
    logger = make_logger(cfg.logger, Path(run_dir), config, name)
    batch_size = fed.algo.batch_size(cfg.batch_size, cfg.clients_per_round)
    engine = choose_engine(cfg.engine.name, fed, batch_size, cfg.clients_per_round, device, cfg.engine.channels_last)
    return Simulation(fed, settings, recorder, logger, engine=engine, config=config, aggregator=aggregator,
                      transforms=transforms, extra_metrics=metrics, statistics_aggregator=statistics_aggregator)


def run_experiment(cfg: DictConfig, run_dir: str | Path, jobs_at_once: int = 1) -> dict[str, Any]:
    """Validate, build and run the experiment described by ``cfg``; write its records to ``run_dir``
    (with ``resume``: continue the checkpointed run there). ``jobs_at_once``: runs of the same sweep
    executing in parallel on this machine (``engine.threads=auto`` shares the cores among them)."""
    validate_config(cfg)
    if (login := wandb_login_missing(cfg.logger)) is not None:
        raise ConfigError(login)
    threads = apply_threads(cfg.engine.threads, jobs_at_once)
    device = resolve_device(cfg.device)
    check_mode(cfg.engine.cuda_graphs, device)
    memory_limit_bytes(cfg.engine.client_state_memory_mb)
    if cfg.replicas > 1:
        return run_replicas(cfg, Path(run_dir), device, threads)
    with failure_recorded(run_dir):
        sim = prepare_run(cfg, run_dir, device, threads)
    return sim.run()


@contextlib.contextmanager
def failure_recorded(run_dir: str | Path) -> Iterator[None]:
    """A bug (any exception but a ``UserError``) while a run is built leaves a ``summary.json``
    with status ``failed``, the error and round 0; a ``UserError`` leaves nothing (``run.py``
    prints it as one line). Failures during the rounds are recorded by ``run_loop.drive``."""
    try:
        yield
    except UserError:
        raise
    except Exception as err:
        record_failure_before_rounds(run_dir, err)
        raise


def record_failure_before_rounds(run_dir: str | Path, err: BaseException) -> None:
    """Record a run that failed before its first round (status ``failed``, the error, round 0) as
    ``run_dirs.record_unfinished`` does: beside a completed run's records, in ``FAILED_ATTEMPT``."""
    record_unfinished(run_dir, {"status": "failed", "rounds_completed": 0, **failure_record(err, 0)})


def prepare_run(cfg: DictConfig, run_dir: str | Path, device: torch.device, threads: int) -> Simulation:
    """The simulation of one run (``replicas=1``), restored from its checkpoint with ``resume``."""
    config = OmegaConf.to_container(cfg, resolve=True)
    checkpoint = None
    if cfg.resume:
        run_dir = Path(cfg.resume)
        checkpoint = load_checkpoint(run_dir, device)
        changed = [k for k in config_differences(checkpoint["config"], config)
                   if k != "rounds" or config["rounds"] < checkpoint["config"]["rounds"]]  # more rounds: extended
        if changed:
            raise ConfigError(f"resume={cfg.resume}: the config differs from the checkpointed run's at "
                              f"{', '.join(changed)}; drop those overrides (resume=<dir> alone takes the run's "
                              "own config)")
    sim = build_simulation(cfg, run_dir, device, config)
    sim.s.threads = threads
    if checkpoint is not None:
        sim.restore(checkpoint)
        log.info(f"resumed {run_dir} after round {checkpoint['rounds_completed']} (its checkpoint), to round "
                 f"{cfg.rounds}" + (f" (extended from {checkpoint['config']['rounds']})"
                                    if cfg.rounds > checkpoint["config"]["rounds"] else ""))
    return sim


def run_replicas(cfg: DictConfig, run_dir: Path, device: torch.device, threads: int) -> dict[str, Any]:
    """``replicas=k``: the runs of seeds ``seed, ..., seed + k - 1`` trained together
    (``engine/replicas.py``), each in ``run_dir/seed_<s>`` with the records and ``.hydra`` files of
    a separate run of that seed; ``run_dir/replicas.json`` lists them. Returns the group's summary:
    the mean final and best accuracy, the first status that is not ``completed``, and each
    replica's summary under ``replicas``."""
    seeds = [cfg.seed + r for r in range(cfg.replicas)]
    sims = []
    for seed, replica in zip(seeds, replica_configs(cfg, seeds, run_dir)):
        with failure_recorded(run_dir / f"seed_{seed}"):
            sim = build_simulation(replica, run_dir / f"seed_{seed}", device,
                                   OmegaConf.to_container(replica, resolve=True))
        sim.s.threads = threads
        sims.append(sim)
    group = ReplicaGroup(sims, progress=cfg.progress)
    if group.unshared:
        print(f"replicas: each trains on its own backend ({group.unshared})")
    summaries = [{**summary, "run_dir": str(run_dir / f"seed_{seed}")} for seed, summary in zip(seeds, group.run())]
    statuses = [s["status"] for s in summaries]
    summary = {
        "status": next((s for s in statuses if s != "completed"), "completed"),
        "final_test_acc": _mean([s.get("final_test_acc") for s in summaries]),
        "best_test_acc": _mean([s.get("best_test_acc") for s in summaries]),
        "rounds_completed": min(s["rounds_completed"] for s in summaries),
        "seeds": seeds,
        "shared_backend": group.unshared is None,
        "replicas": summaries,
    }
    atomic_write_text(run_dir / "replicas.json", json.dumps(summary, indent=2) + "\n")
    return summary


def replica_configs(cfg: DictConfig, seeds: list[int], run_dir: Path) -> list[DictConfig]:
    """One config per seed (``seed`` set, ``replicas=1``: a separate run's config), written with
    the run's overrides (``replicas`` dropped, ``seed`` set) to ``run_dir/seed_<s>/.hydra``, as
    Hydra writes a run's, so that the record readers see k ordinary runs."""
    parent = next((d / "overrides.yaml" for d in (run_dir / STAGED, run_dir / ".hydra") if d.is_dir()),
                  run_dir / ".hydra" / "overrides.yaml")
    overrides = [str(o) for o in OmegaConf.load(parent)] if parent.exists() else []
    kept = [o for o in overrides if o.partition("=")[0].lstrip("+~") not in ("replicas", "seed")]
    configs = []
    for seed in seeds:
        replica = copy.deepcopy(cfg)
        replica.seed, replica.replicas = seed, 1
        hydra_dir = run_dir / f"seed_{seed}" / ".hydra"
        hydra_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(replica, hydra_dir / "config.yaml")
        OmegaConf.save(OmegaConf.create([*kept, f"seed={seed}"]), hydra_dir / "overrides.yaml")
        configs.append(replica)
    return configs


def _mean(values: list[Any]) -> Any:
    return None if any(v is None for v in values) else sum(values) / len(values)
