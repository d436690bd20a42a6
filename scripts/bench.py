"""Benchmark the engines against a typical FL training loop: ``python scripts/bench.py --preset NAME``.

For one preset (model, data sizes, clients, batch size, algorithm of a paper's setting, on
synthetic tensors of the right shapes) it measures seconds per round, samples per second and peak
memory of

1. ``engine=loop`` (and ``loop`` with ``channels_last``),
2. ``engine=vmap`` and ``engine=packed`` with ``engine.cuda_graphs=auto`` (on CUDA the local step
   captured once a round and replayed, ``engine/graphs.py``; eager elsewhere), and ``packed_eager``
   (``engine.cuda_graphs=off``, the run's default, the same backend without graphs),
3. a *typical FL loop*, written the way the papers' public code trains clients (e.g. HBN's
   ``FedBaseline/models/FedAvg/clients.py``): per client and round a ``copy.deepcopy`` of the
   global model, a fresh ``torch.optim.SGD``, a ``torch.utils.data.DataLoader`` over a ``Dataset``
   that turns uint8 HWC images into tensors one sample at a time with torchvision transforms
   (PIL image, the preset's crop + flip, ``ToTensor``, ``Normalize``), and ``loss.item()`` per
   step; same model, data sizes and number of local steps, and the gradient clipping of the
   algorithm's config (``algo.clip_grad_norm``, FedAvg's default 10 as in HBN's code:
   ``clip_grad_norm_`` per step), so all rows do equal work.

and ``engine=auto`` (the backend it selects, see ``fedbn_bench/engine/select.py``). Each row also
has the FLOPs of one round (one more round after the timed ones, under
``torch.utils.flop_counter``, grouped convolutions counted right, ``engine/flops.py``: forward and
backward convolutions and matmuls), the
achieved rate (FLOPs per round / seconds per round), the ATen operations per local step (one
more round under ``engine/op_count.py``'s ``OpCounter``, divided by the round's local steps: what
the host issues, the cost that bounds a small step), and that rate as a fraction of a dense float32
matmul rate measured in the same invocation (``matmul`` row: a 2048x2048 ``torch.mm``, same
threads): how far each backend is from what the hardware does. On the CPU every configuration runs
in a fresh process (so peak memory is its own); on CUDA all of them run in this process
(``--processes one``, the default there: a fresh process cost about 10 s of start-up on the H200
before any round), with ``torch.cuda.reset_peak_memory_stats`` before each, so that its peak
memory is still its own. Each has ``--warmup`` untimed rounds before ``--rounds`` timed ones, and
is timed ``--repeats`` times in alternating order
(forward, then backward through the list, so slow phases of a shared machine hit every row); the
table reports, per row, the repeat with the fastest median round. Peak memory is
``torch.cuda.max_memory_allocated`` on CUDA and the peak resident set size of the process
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``, Python and torch included) on CPU, none there
with ``--processes one``. The table is
printed and written to ``results/bench/<preset>.csv`` (``gpu_<preset>.csv`` with ``--device cuda``) with each row's speed ratio to the typical
loop measured in the same invocation (wall time and process CPU time; CPU time is less sensitive
to other processes sharing the machine).

``--algo fedavg,fedprox,...`` times the configurations (by default only ``auto``) once per FL
algorithm on the preset, with each row's speed relative to FedAvg's in the same configuration
(``speed_vs_fedavg``), written to ``results/bench/<preset>_algos.csv``. ``--norm bn,hbn`` does the
same per norm method, with each row's time (wall and CPU) relative to the first norm's in the same
configuration (``time_vs_<norm>``, ``cpu_time_vs_<norm>``), written to
``results/bench/<preset>_norms.csv``. The ``eval`` configuration includes the statistics a run
re-estimates before each test (HBN §4.1, ``eval_statistics``).

``--sweep "norm=bn,gn rounds=15"`` times a whole sweep of ``run.py`` (issue 16, item 1): the same
``python run.py -m <overrides>`` sequentially and with ``hydra/launcher=joblib
hydra.launcher.n_jobs=<--n-jobs>``, alternating, ``--repeats`` times each, in fresh processes.
Each row has the command's wall time; the jobs' training time (their ``summary.json``
``wall_time_s``, each in ``job_train_s``), summed for the sequential sweep and spread over the
workers for the parallel one (at least its longest job); the rest (start-up: imports, config
composition, data, logger; shutdown); and the threads each job got. ``training_ceiling`` is the
sequential sweep's training time over the parallel sweep's: the speed-up it would reach if
nothing but training took time. Written to ``results/bench/sweep_<overrides>.csv``.

``--scale 100,1000,10000`` times what a round, an evaluation, setup and a checkpoint cost, and the
memory of the clients' state, as the federation grows (issue 58; ``scripts/bench_scale.py``),
written to ``results/bench/scale.csv``.
"""
from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from hydra import compose, initialize_config_dir
from torch.utils.data import DataLoader, Dataset

from fedbn_bench.algorithms import build_algorithm
from fedbn_bench.config.schema import register_schemas
from fedbn_bench.data import DatasetBundle, Split
from fedbn_bench.engine.select import select_engine
from fedbn_bench.engine.federation import ClientRecord, Federation
from fedbn_bench.engine.flops import flop_counter
from fedbn_bench.engine.graphs import NOTHING_REPEATED, GraphRecord, graphs_set_aside, may_empty_cache
from fedbn_bench.engine.op_count import OpCounter
from fedbn_bench.engine.replicas import ReplicaGroup
from fedbn_bench.engine.settings import RunSettings
from fedbn_bench.engine.simulation import Simulation
from fedbn_bench.norms import build_norm
from fedbn_bench.records.loggers import NullLogger
from fedbn_bench.records.run_records import RunRecorder
from fedbn_bench.runner import build_simulation, prepared_model

ROOT = Path(__file__).resolve().parents[1]
POOL = 5000  # distinct synthetic samples; each client holds a random subset of them


@dataclass
class Preset:
    """A paper's training setting (model, shapes, clients, batch size, algorithm)."""

    model: str
    input_shape: tuple[int, int, int]
    num_clients: int
    clients_per_round: int
    client_size: int
    batch_size: int
    overrides: list[str] = field(default_factory=list)
    note: str = ""
    rounds: int = 2
    """Default timed rounds: a few minutes for all configurations on a 2-core CPU."""
    augment: bool = False
    """Random crop (padding 4) + horizontal flip in training, as the paper's public code does:
    per sample with torchvision in the typical loop, batched on the device in the engines."""
    experiment: list[str] = field(default_factory=list)
    """A real-data preset: the run's Hydra overrides (its data, roles and attacks); only the
    ``robust_eval`` configuration times it."""


PRESETS = {
    "hbn_cifar10": Preset(
        "simple_cnn", (3, 32, 32), 100, 10, 500, 4, ["norm=bn", "algo=fedavg", "algo.local_epochs=1"],
        "HBN §4.1 / App. B.1: Simple-CNN, CIFAR-10, 10 of 100 clients, B=4, one local epoch of 500, crop+flip",
        augment=True),
    "fbn_cifar10": Preset(
        "fbn_cnn", (3, 32, 32), 10, 10, 5000, 50, ["norm=bn", "algo=dsgd"],
        "FBN App. C: CNN of Table 1, CIFAR-10, DSGD, 10 clients, B=50 (one step per round)", rounds=5),
    "fedbn_digits": Preset(
        "digit_cnn", (3, 28, 28), 5, 5, 743, 32, ["norm=fedbn", "algo=fedavg", "algo.momentum=0",
                                                  "algo.weight_decay=0", "algo.local_epochs=1"],
        "FedBN §5 / App. D.2: DigitModel, 5 clients of 743 digits (28x28 RGB), B=32, E=1", rounds=1),
    "fedrbn_digits": Preset(
        "simple_cnn", (3, 28, 28), 25, 25, 150, 32, ["norm=fedrbn", "algo=fedavg"],
        "FedRBN Table 2 '20 %' on the Digits-5 stand-in (fedrbn/base/digits.yaml): 25 users, 3 of them AT, PGD-7 "
        "on every user's test shard and validation data (needs MNIST under data/)", rounds=2,
        experiment=["experiment=fedrbn/table2_digits", "+experiment/fedrbn/method=fedrbn",
                    "+experiment/fedrbn/setting=digits_20"]),
}
ROBUST_EVAL_CONFIGS = {"robust_eval": ["adversarial.robust_test=every"],
                       "robust_eval_best_val": ["adversarial.robust_test=best_val"]}
"""The robust evaluation's timings: with every evaluation attacking the test splits, and with them
attacked only at the best validation round (``best_val_test_s``, once a run). A ``--baseline`` checkout times
``robust_eval`` for both (it may predate ``adversarial.robust_test``)."""
CONFIGS = ("typical", "loop", "loop_cl", "vmap", "packed", "packed_eager")
"""Training configurations; ``eval`` (seconds per evaluation of 10,000 test images, ``--configs eval``),
``robust_eval`` (seconds per evaluation of a real-data preset's run, its robust accuracy
included, with the evaluation's results in the row), ``replicas`` (``--replicas`` seeds trained together on the ``auto`` engine, ``engine/replicas.py``;
its ``speedup_vs_sequential`` is against that many rounds of the fastest single-run row) and
``matmul`` (the hardware reference, always) are timed apart from them."""


def compose_config(preset: Preset, extra: list[str]):
    """The preset's run config, without logger or progress bar: its experiment (a real-data preset)
    or its synthetic setting, then ``extra``."""
    setting = preset.experiment or [
        f"model={preset.model}", f"num_clients={preset.num_clients}", f"clients_per_round={preset.clients_per_round}",
        f"batch_size={preset.batch_size}", *preset.overrides]
    register_schemas()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=["logger=none", "progress=false", *setting, *extra])


def synthetic_federation(preset: Preset, cfg, device: torch.device, seed: int = 0):
    """Synthetic uint8 images, their normalized float tensors, labels and client index sets."""
    g = torch.Generator().manual_seed(seed)
    c, h, w = preset.input_shape
    images = torch.randint(0, 256, (POOL, h, w, c), generator=g, dtype=torch.uint8)
    labels = torch.randint(0, 10, (POOL,), generator=g)
    mean, std = torch.full((c,), 0.5), torch.full((c,), 0.25)
    x = ((images.permute(0, 3, 1, 2).float() / 255 - mean.view(1, c, 1, 1)) / std.view(1, c, 1, 1)).contiguous()
    # contiguous NCHW, as every dataset loader stores its images (the permuted view is channels-last)
    clients = [torch.randperm(POOL, generator=g)[: preset.client_size] for _ in range(preset.num_clients)]
    norm, algo = build_norm(cfg.norm), build_algorithm(cfg.algo)
    torch.manual_seed(seed)
    model = prepared_model(cfg.model, norm, algo, preset.input_shape, 10)
    return images, labels, x, (mean, std), clients, norm, algo, model


# -- the engines -------------------------------------------------------------------------------
def engine_rounds(preset: Preset, cfg, device: torch.device, engine: str, rounds: int,
                  test_size: int = 10, seed: int = 0) -> tuple[Simulation, str]:
    _, labels, x, _, clients, norm, algo, model = synthetic_federation(preset, cfg, device, seed)
    test = torch.arange(test_size) % POOL
    data = DatasetBundle("synthetic", Split(x, labels), Split(x[test], labels[test]), 10).to(device)
    fed = Federation(data, [ClientRecord(c.to(device)) for c in clients], model.to(device), norm, algo)
    batch_size = algo.batch_size(cfg.batch_size, cfg.clients_per_round)
    backend = select_engine(engine, fed, batch_size, cfg.clients_per_round, device)
    settings = RunSettings(rounds=rounds, clients_per_round=cfg.clients_per_round, batch_size=cfg.batch_size,
                           lr=cfg.algo.lr, schedule=cfg.algo.schedule, seed=seed, eval_every=rounds, progress=False,
                           channels_last=cfg.engine.channels_last, augment=preset.augment,
                           cuda_graphs=cfg.engine.cuda_graphs)
    sim = Simulation(fed, settings, RunRecorder(tempfile.mkdtemp()), NullLogger(), engine=backend)
    return sim, backend


# -- the typical loop --------------------------------------------------------------------------
class ImageDataset(Dataset):
    """uint8 HWC images turned into tensors one at a time, as torchvision datasets do."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, transform) -> None:
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        from PIL import Image

        return self.transform(Image.fromarray(self.images[i])), int(self.labels[i])


class TypicalFL:
    """FedAvg / DSGD / FedBN the way the papers' public code writes a round (see module docstring)."""

    def __init__(self, preset: Preset, cfg, device: torch.device) -> None:
        from torchvision import transforms

        images, labels, _, (mean, std), clients, norm, algo, model = synthetic_federation(preset, cfg, device)
        self.cfg, self.device, self.algo = cfg, device, algo
        self.model = model.to(device)
        self.local_keys = norm.local_keys(self.model)
        self.client_bn = [{k: v.clone() for k, v in self.model.state_dict().items() if k in self.local_keys}
                          for _ in clients]
        augment = [transforms.RandomCrop(preset.input_shape[1], padding=4), transforms.RandomHorizontalFlip()]
        transform = transforms.Compose([*(augment if preset.augment else []), transforms.ToTensor(),
                                        transforms.Normalize(mean.tolist(), std.tolist())])
        images, labels = images.numpy(), labels.numpy()
        self.datasets = [ImageDataset(images[c.numpy()], labels[c.numpy()], transform) for c in clients]
        self.batch_size = algo.batch_size(cfg.batch_size, cfg.clients_per_round)
        self.dsgd = cfg.algo.name == "dsgd"
        self.momentum: dict[int, list[torch.Tensor]] = {}
        self.rng = np.random.default_rng(0)

    def run_round(self, round_idx: int) -> int:
        cfg, n = self.cfg, len(self.datasets)
        clients = sorted(self.rng.choice(n, cfg.clients_per_round, replace=False).tolist())
        states, samples = [], 0
        for c in clients:
            local = copy.deepcopy(self.model)
            local.load_state_dict(self.client_bn[c], strict=False)
            loader = DataLoader(self.datasets[c], batch_size=self.batch_size, shuffle=True, drop_last=True)
            local.train()
            if self.dsgd:
                states.append(self.dsgd_client(local, c, next(iter(loader))))
                samples += self.batch_size
                continue
            opt = torch.optim.SGD(local.parameters(), lr=cfg.algo.lr, momentum=cfg.algo.momentum,
                                  weight_decay=cfg.algo.weight_decay)
            losses = []
            for _ in range(cfg.algo.local_epochs):
                for xb, yb in loader:
                    xb, yb = xb.to(self.device), yb.to(self.device)
                    loss = F.cross_entropy(local(xb), yb)
                    opt.zero_grad()
                    loss.backward()
                    if cfg.algo.get("clip_grad_norm"):
                        torch.nn.utils.clip_grad_norm_(local.parameters(), cfg.algo.clip_grad_norm)
                    opt.step()
                    losses.append(loss.item())
                    samples += len(yb)
            state = local.state_dict()
            self.client_bn[c] = {k: v.clone() for k, v in state.items() if k in self.local_keys}
            states.append(state)
        self.aggregate(states, clients)
        return samples

    def dsgd_client(self, local: torch.nn.Module, c: int, batch) -> dict[str, torch.Tensor]:
        xb, yb = batch[0].to(self.device), batch[1].to(self.device)
        loss = F.cross_entropy(local(xb), yb)
        local.zero_grad()
        loss.backward()
        beta = self.cfg.algo.client_momentum
        grads = [p.grad.detach().clone() for p in local.parameters()]
        if c in self.momentum:
            grads = [beta * m + (1 - beta) * g for m, g in zip(self.momentum[c], grads)]
        self.momentum[c] = grads
        out = {k: v.clone() for k, v in local.named_buffers()}
        out.update({f"grad:{name}": g for (name, _), g in zip(local.named_parameters(), grads)})
        return out

    @torch.no_grad()
    def aggregate(self, states: list[dict[str, torch.Tensor]], clients: list[int]) -> None:
        sizes = torch.tensor([len(self.datasets[c]) for c in clients], dtype=torch.float32)
        weights = sizes / sizes.sum()
        new = {}
        for key in states[0]:
            if key in self.local_keys:
                continue
            stacked = torch.stack([s[key].float() for s in states])
            new[key] = (weights.to(stacked.device).view(-1, *[1] * (stacked.dim() - 1)) * stacked).sum(0)
        if self.dsgd:
            for name, p in self.model.named_parameters():
                p -= self.cfg.algo.lr * new.pop(f"grad:{name}")
        state = self.model.state_dict()
        self.model.load_state_dict({k: v.to(state[k].dtype) for k, v in new.items()}, strict=False)


# -- measurement -------------------------------------------------------------------------------
def measure(preset_name: str, config: str, rounds: int, warmup: int, device: torch.device,
            overrides: list[str], replicas: int = 4) -> dict:
    """Time ``warmup + rounds`` rounds of one configuration in this process."""
    if config == "matmul":
        return measure_matmul(device)
    if config == "eval":
        return measure_evaluation(preset_name, rounds, warmup, device, overrides)
    if config in ROBUST_EVAL_CONFIGS:
        return measure_robust_evaluation(preset_name, rounds, warmup, device,
                                         [*overrides, *ROBUST_EVAL_CONFIGS[config]], config)
    if config == "replicas":
        return measure_replicas(preset_name, rounds, warmup, device, overrides, replicas)
    preset = PRESETS[preset_name]
    engine = {"typical": "loop", "loop": "loop", "loop_cl": "loop", "vmap": "vmap", "packed": "packed",
              "packed_eager": "packed", "auto": "auto"}[config]
    extra = [*overrides, f"engine={engine}", f"engine.channels_last={config == 'loop_cl'}",
             f"engine.cuda_graphs={'auto' if config in ('packed', 'vmap') else 'off'}"]
    cfg = compose_config(preset, extra)
    if config == "typical":
        runner, backend = TypicalFL(preset, cfg, device), "typical"
        step = runner.run_round
    else:
        sim, backend = engine_rounds(preset, cfg, device, engine, warmup + rounds + 2)

        def step(r: int) -> int:
            before = sim.rounds.samples_seen
            sim.run_round(r)
            return sim.rounds.samples_seen - before

        row = timed_rounds(step, config, backend, rounds, warmup, device, local_steps(preset, cfg),
                           eager_step(sim, step))
        return {**row, "backend": graphed_label(backend, sim.graph_record)}
    return timed_rounds(step, config, backend, rounds, warmup, device, local_steps(preset, cfg))


def eager_step(sim, step):
    """``step`` with the run's CUDA graphs set aside: a replayed step dispatches nothing, so FLOPs and ATen
    operations are counted on the eager round, which runs the same kernels."""
    def run(r: int) -> int:
        with graphs_set_aside(sim.backend.ctx):
            return step(r)

    return run


def graphed_label(backend: str, record: GraphRecord) -> str:
    """The row's backend as it ran: ``+graphs`` when its rounds replayed a captured step, and the reason
    where rounds fell back to eager."""
    fallbacks = [reason for reason in record.eager_reasons if reason != NOTHING_REPEATED]
    label = f"{backend}+graphs" if record.rounds_replayed else backend
    return label + (f" (eager rounds: {fallbacks[0]})" if fallbacks else "")


def local_steps(preset: Preset, cfg) -> int:
    """Local steps of a round: every client of a preset holds ``client_size`` samples."""
    algo = build_algorithm(cfg.algo)
    return algo.num_steps(preset.client_size, algo.batch_size(cfg.batch_size, cfg.clients_per_round))


def measure_replicas(preset_name: str, rounds: int, warmup: int, device: torch.device, overrides: list[str],
                     replicas: int) -> dict:
    """``replicas`` seeds of the preset trained together (one backend call per round) on ``auto``."""
    preset = PRESETS[preset_name]
    cfg = compose_config(preset, [*overrides, "engine=auto"])
    sims = [engine_rounds(preset, cfg, device, "auto", warmup + rounds + 2, seed=s)[0] for s in range(replicas)]
    group = ReplicaGroup(sims, progress=False)

    def step(r: int) -> int:
        before = sum(sim.rounds.samples_seen for sim in sims)
        group.train_round(sims, r)
        return sum(sim.rounds.samples_seen for sim in sims) - before

    apart = " (apart)" if group.unshared else ""  # no shared backend: each replica trains on its own
    return timed_rounds(step, "replicas", f"{sims[0].engine} x{replicas}{apart}", rounds, warmup, device,
                        local_steps(preset, cfg))


def timed_rounds(step, config: str, backend: str, rounds: int, warmup: int, device: torch.device,
                 steps_per_round: int, counted_step=None) -> dict:
    """Median seconds (wall and CPU) and samples of ``rounds`` calls of ``step(round)`` after
    ``warmup`` untimed ones, the FLOPs of one more, the ATen operations per local step of another
    (``steps_per_round`` steps; both rounds run by ``counted_step``, default ``step``), and the
    process's peak memory."""
    counted_step = counted_step or step
    walls, cpus, samples = [], [], []
    for r in range(warmup + rounds):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0, c0 = time.perf_counter(), time.process_time()
        n = step(r)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if r >= warmup:
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            samples.append(n)
    with flop_counter() as counter:
        counted_step(warmup + rounds)
    flops = counter.get_total_flops()
    with OpCounter() as ops:
        counted_step(warmup + rounds + 1)
    if device.type == "cuda":
        peak, kind = torch.cuda.max_memory_allocated() / 2**20, "cuda_max_allocated"
    else:
        peak, kind = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "cpu_peak_rss"
    return {"config": config, "backend": backend, "s_per_round": statistics.median(walls),
            "cpu_s_per_round": statistics.median(cpus), "samples_per_round": statistics.median(samples),
            "peak_mem_mib": peak, "mem_kind": kind, "gflop_per_round": flops / 1e9,
            "aten_ops_per_step": ops.total / steps_per_round}


def measure_evaluation(preset_name: str, rounds: int, warmup: int, device: torch.device, overrides: list[str],
                       test_size: int = 10_000) -> dict:
    """Seconds per evaluation of the global model on ``test_size`` test images (the run's metric
    list), after re-estimating the statistics on a round's clients where the run does (HBN §4.1)."""
    preset = PRESETS[preset_name]
    cfg = compose_config(preset, [*overrides, "engine=loop"])
    sim, _ = engine_rounds(preset, cfg, device, "loop", 1, test_size)
    walls = []
    for r in range(warmup + rounds):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fresh = sim.rounds.fresh_statistics(r) if sim.loop.reestimate else {}
        sim.evaluator.evaluate({**sim.store.global_state, **fresh})
        if device.type == "cuda":
            torch.cuda.synchronize()
        if r >= warmup:
            walls.append(time.perf_counter() - t0)
    return {"config": "eval", "backend": "evaluator", "s_per_round": statistics.median(walls),
            "cpu_s_per_round": statistics.median(walls), "samples_per_round": test_size, "peak_mem_mib": 0.0,
            "mem_kind": "", "gflop_per_round": float("nan")}


def measure_robust_evaluation(preset_name: str, rounds: int, warmup: int, device: torch.device,
                               overrides: list[str], config: str = "robust_eval") -> dict:
    """Seconds per evaluation (the run's whole metric list, robust accuracy included) of a
    real-data preset's run before training; the row carries what the evaluation measured
    (``robust_acc``, ``clean_acc``, ``val_select``), so that two checkouts' rows can be compared.
    With ``adversarial.robust_test=best_val`` an evaluation attacks no test split; the row adds
    ``best_val_test_s``, the once-a-run robust test of the kept state, and its ``robust_acc``."""
    preset = PRESETS[preset_name]
    if not preset.experiment:
        raise ValueError(f"robust_eval needs a real-data preset (one with an experiment), not {preset_name}")
    cfg = compose_config(preset, [f"device={device.type}", *overrides])
    sim = build_simulation(cfg, tempfile.mkdtemp(), device, {})
    walls, tests, row = [], [], {}
    for r in range(warmup + rounds):
        t0 = time.perf_counter()
        row = sim.evaluator.evaluate()
        if r >= warmup:
            walls.append(time.perf_counter() - t0)
        if sim.evaluator.defers_robust_test:
            t0 = time.perf_counter()
            row = {**row, **sim.evaluator.evaluate(robust_test=True)}
            if r >= warmup:
                tests.append(time.perf_counter() - t0)
    return {"config": config, "backend": "evaluator", "s_per_round": statistics.median(walls),
            "cpu_s_per_round": statistics.median(walls), "samples_per_round": len(sim.fed.data.test.y),
            "peak_mem_mib": 0.0, "mem_kind": "", "gflop_per_round": float("nan"),
            "best_val_test_s": statistics.median(tests) if tests else float("nan"),
            **{k: row.get(k, float("nan")) for k in ("robust_acc", "clean_acc", "val_select")}}


def measure_matmul(device: torch.device, n: int = 2048, repeats: int = 10) -> dict:
    """The dense float32 matmul rate (GFLOP/s, 2n³ per product) of this process's threads."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    times = []
    for _ in range(repeats + 2):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.mm(a, b)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    best = min(times[2:])
    return {"config": "matmul", "backend": "torch.mm", "s_per_round": best, "cpu_s_per_round": best,
            "samples_per_round": 0, "peak_mem_mib": 0.0, "mem_kind": "", "gflop_per_round": 2 * n**3 / 1e9}


def run_child(args: argparse.Namespace, config: str, choice: dict[str, str], tree: Path = ROOT) -> dict:
    """Time ``config`` with the groups ``choice`` names (``{"algo": ..., "norm": ...}``, each
    missing one the preset's): in a fresh process, with the package and this script of checkout
    ``tree`` (this checkout's in this process with ``--processes one``)."""
    overrides = [*args.override, *(f"{group}={value}" for group, value in choice.items())]
    if args.processes == "one" and tree == ROOT:
        row = measure_here(args, config, overrides)
    else:
        row = measure_in_child(args, config, overrides, tree)
    for group in ("algo", "norm"):
        row[group] = choice.get(group) or next(o.split("=", 1)[1] for o in PRESETS[args.preset].overrides
                                               if o.startswith(f"{group}="))
    if tree != ROOT:
        row["config"] = f"baseline:{config}"
    return row


def measure_in_child(args: argparse.Namespace, config: str, overrides: list[str], tree: Path) -> dict:
    """``measure`` in a fresh process of checkout ``tree``: its ``src`` first on ``PYTHONPATH``,
    followed by what this process was given (where a bare machine's installed packages are)."""
    script = tree / "scripts" / "bench.py"
    cmd = [sys.executable, str(script), "--preset", args.preset, "--child", config, "--rounds", str(args.rounds),
           "--warmup", str(args.warmup), "--device", args.device, *[f"--override={o}" for o in overrides],
           *(["--replicas", str(args.replicas)] if config == "replicas" else [])]
    inherited = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "src"), *([inherited] if inherited else [])])}
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=tree, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{config} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_here(args: argparse.Namespace, config: str, overrides: list[str]) -> dict:
    """``measure`` in this process. On CUDA the peak memory is reset first, so it is this
    configuration's; on the CPU the process's peak RSS spans every configuration before it, so the
    row has none."""
    device = torch.device(args.device)
    if device.type == "cuda":
        gc.collect()  # the previous configuration's simulation, if a reference cycle holds it
        if may_empty_cache():
            torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    row = measure(args.preset, config, args.rounds, args.warmup, device, overrides, args.replicas)
    if device.type == "cpu":
        row.update(peak_mem_mib=float("nan"), mem_kind="")
    return row


def override_suffix(overrides: list[str]) -> str:
    """The part of a results file's name that names its overrides: ``_key-value`` each."""
    return "".join(f"_{o.replace('=', '-')}" for o in overrides)


SWEEP_MODES = ("sequential", "joblib")


def time_sweep(overrides: list[str], mode: str, n_jobs: int) -> dict:
    """Run ``python run.py -m <overrides>`` (``mode``: the basic launcher or joblib with ``n_jobs``)
    in a fresh process; its wall time and its jobs' training times and threads."""
    launcher = ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={n_jobs}"] if mode == "joblib" else []
    with tempfile.TemporaryDirectory() as sweep_dir:
        cmd = [sys.executable, "run.py", "-m", *launcher, *overrides, f"hydra.sweep.dir={sweep_dir}"]
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
        wall = time.perf_counter() - t0
        if out.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)} failed:\n{out.stderr[-3000:]}")
        jobs = [json.loads(p.read_text()) for p in sorted(Path(sweep_dir).glob("*/summary.json"))]
    return sweep_row(mode, n_jobs, wall, jobs)


def sweep_row(mode: str, n_jobs: int, wall: float, jobs: list[dict]) -> dict:
    """A sweep's row from its wall time and its jobs' ``summary.json``: the training time is the
    jobs' summed ``wall_time_s`` sequentially, and spread over ``min(n_jobs, jobs)`` workers (at
    least the longest job) in parallel; the rest of the wall time is ``outside_s``."""
    train = [job["wall_time_s"] for job in jobs]
    workers = 1 if mode == "sequential" else min(n_jobs, len(train))
    span = max(sum(train) / workers, max(train))
    return {"mode": mode if mode == "sequential" else f"joblib n_jobs={n_jobs}", "wall_s": wall, "train_s": span,
            "outside_s": wall - span, "jobs": len(jobs), "threads": ",".join(str(job["threads"]) for job in jobs),
            "job_train_s": ",".join(f"{t:.2f}" for t in train)}


def bench_sweep(args: argparse.Namespace) -> None:
    """``--sweep``: the sequential and the joblib sweep, alternating, ``--repeats`` times each."""
    import pandas as pd

    overrides = shlex.split(args.sweep)
    rows = []
    for r in range(args.repeats):
        for mode in SWEEP_MODES if r % 2 == 0 else SWEEP_MODES[::-1]:
            rows.append({"repeat": r, **time_sweep(overrides, mode, args.n_jobs)})
            print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    sequential = table[table["mode"] == "sequential"]
    parallel = table[table["mode"] != "sequential"]
    table["speedup_vs_sequential"] = sequential["wall_s"].median() / table["wall_s"]
    table["training_ceiling"] = sequential["train_s"].median() / parallel["train_s"].median()
    table["sweep"] = args.sweep
    print(f"sweep: python run.py -m {args.sweep}  (medians: sequential {sequential['wall_s'].median():.1f} s, "
          f"joblib {parallel['wall_s'].median():.1f} s)")
    print(table.drop(columns=["sweep"]).to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"sweep{override_suffix(overrides)}.csv"
    table.to_csv(path, index=False, float_format="%.4g")
    print(f"wrote {path}")


def relative_to(table, group: str, value: str, column: str):
    """Each row's ``column`` over that of the row with ``group`` = ``value`` and otherwise the same
    configuration, algorithm and norm (NaN where there is none)."""
    keys = [k for k in ("config", "algo", "norm") if k != group]
    reference = table[table[group] == value].set_index(keys)[column]
    return table[column].to_numpy() / reference.reindex(table.set_index(keys).index).to_numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS))
    parser.add_argument("--rounds", type=int, help="timed rounds per configuration (default: the preset's)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds before them")
    parser.add_argument("--repeats", type=int, default=1, help="timings per configuration (the fastest is kept)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--configs", help=f"subset of {','.join(CONFIGS)} (default: all; with --algo or --norm: "
                                           "none); auto is always timed")
    parser.add_argument("--algo", help="comma-separated algorithms timed on the preset (e.g. fedavg,fedprox): "
                                       "each configuration once per algorithm, with its speed relative to fedavg's")
    parser.add_argument("--norm", help="comma-separated norm methods timed on the preset (e.g. bn,hbn): each "
                                       "configuration once per norm, with its time relative to the first norm's")
    parser.add_argument("--override", action="append", default=[],
                        help="extra Hydra override for every configuration, e.g. --override batch_size=16")
    parser.add_argument("--baseline", type=Path,
                        help="another checkout (e.g. a `git worktree` of an older commit) whose configurations "
                             "are timed in the same invocation, interleaved, as rows `baseline:<config>`")
    parser.add_argument("--replicas", type=int, default=4, help="seeds trained together by the replicas config")
    parser.add_argument("--processes", choices=("each", "one"),
                        help="a fresh process per configuration (each; default on the CPU) or all in this one "
                             "(one; default on CUDA)")
    parser.add_argument("--out", default=str(ROOT / "results" / "bench"))
    parser.add_argument("--sweep", help='time `python run.py -m SWEEP` sequentially against the joblib launcher, '
                                        'e.g. --sweep "norm=bn,gn rounds=15" (no --preset)')
    parser.add_argument("--n-jobs", type=int, default=2, help="the joblib launcher's n_jobs for --sweep")
    parser.add_argument("--scale", help="time a round, an evaluation, setup and memory at these federation sizes, "
                                        "e.g. --scale 100,1000,10000 (no --preset; scripts/bench_scale.py)")
    parser.add_argument("--scale-methods", default="fedavg_bn,fedbn,scaffold_bn")
    parser.add_argument("--local-steps", type=int, default=5, help="local steps a client takes per round for --scale")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sweep:
        bench_sweep(args)
        return
    if args.scale:
        from bench_scale import bench_scale

        print(bench_scale([int(n) for n in args.scale.split(",")], args.scale_methods.split(","),
                          args.rounds or 3, args.local_steps, Path(args.out)).to_string(index=False))
        return
    if not args.preset:
        parser.error(f"--preset is required (one of {', '.join(sorted(PRESETS))}) unless --sweep is given")
    device = torch.device(args.device)
    args.rounds = args.rounds or PRESETS[args.preset].rounds
    args.processes = args.processes or ("one" if device.type == "cuda" else "each")
    if args.child:
        print(json.dumps(measure(args.preset, args.child, args.rounds, args.warmup, device, args.override,
                                 args.replicas)))
        return
    default = "" if args.algo or args.norm else ",".join(CONFIGS)
    always = ["matmul"] if PRESETS[args.preset].experiment else ["auto", "matmul"]
    configs = [c for c in (args.configs if args.configs is not None else default).split(",") if c] + always
    algos = args.algo.split(",") if args.algo else [None]
    norms = args.norm.split(",") if args.norm else [None]
    choices = [{k: v for k, v in (("algo", a), ("norm", n)) if v} for a in algos for n in norms]
    jobs = [(c, choice, ROOT) for choice in choices for c in configs]
    if args.baseline:
        baseline = dict.fromkeys("robust_eval" if c in ROBUST_EVAL_CONFIGS else c for c in configs if c != "matmul")
        jobs += [(c, choice, args.baseline.resolve()) for choice in choices for c in baseline]
    runs: dict[tuple[str, str, str], list[dict]] = {}
    for r in range(args.repeats):
        for config, choice, tree in jobs if r % 2 == 0 else jobs[::-1]:
            row = run_child(args, config, choice, tree)
            runs.setdefault((row["config"], row["algo"], row["norm"]), []).append(row)
            table, path = write_table(args, runs, algos, norms)  # each row as it is measured
    print(f"{args.preset}: {PRESETS[args.preset].note} {' '.join(args.override)}")
    print(table.drop(columns=["preset", "mem_kind", "overrides"]).to_string(
        index=False, float_format=lambda v: f"{v:.3g}"))
    print(f"wrote {path}")


def write_table(args: argparse.Namespace, runs: dict, algos: list, norms: list):
    """The table of the configurations measured so far (the fastest of each's repeats, with the
    columns relative to other rows where those rows exist), written to its CSV: ``(table, path)``."""
    import pandas as pd

    rows = {key: min(results, key=lambda row: row["s_per_round"]) for key, results in runs.items()}
    table = pd.DataFrame(list(rows.values()))
    table["samples_per_s"] = table["samples_per_round"] / table["s_per_round"]
    table["gflop_per_s"] = table["gflop_per_round"] / table["s_per_round"]
    matmul = table.loc[table["config"] == "matmul", "gflop_per_s"].max()
    table["fraction_of_matmul"] = table["gflop_per_s"] / matmul
    typical = next((row for (config, *_), row in rows.items() if config == "typical"), None)
    if typical:
        table["speedup_vs_typical"] = typical["s_per_round"] / table["s_per_round"]
        table["cpu_speedup_vs_typical"] = typical["cpu_s_per_round"] / table["cpu_s_per_round"]
    single = table[~table["config"].isin(["typical", "eval", *ROBUST_EVAL_CONFIGS, "matmul", "replicas"])]["s_per_round"]
    if (table["config"] == "replicas").any() and len(single):
        together = table["config"] == "replicas"
        table["speedup_vs_sequential"] = float("nan")
        table.loc[together, "speedup_vs_sequential"] = args.replicas * single.min() / table.loc[together, "s_per_round"]
    if args.algo and "fedavg" in algos and (table["algo"] == "fedavg").any():
        table["speed_vs_fedavg"] = 1 / relative_to(table, "algo", "fedavg", "s_per_round")
    if args.norm and (table["norm"] == norms[0]).any():
        table[f"time_vs_{norms[0]}"] = relative_to(table, "norm", norms[0], "s_per_round")
        table[f"cpu_time_vs_{norms[0]}"] = relative_to(table, "norm", norms[0], "cpu_s_per_round")
    table.insert(0, "preset", args.preset)
    table["device"] = args.device
    table["threads"] = torch.get_num_threads()
    table["rounds"] = args.rounds
    table["repeats"] = args.repeats
    table["overrides"] = " ".join(args.override)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = (("gpu_" if args.device == "cuda" else "") + args.preset + ("_algos" if args.algo else "")
            + ("_norms" if args.norm else "") + override_suffix(args.override))
    path = out / f"{name}.csv"
    table.to_csv(path, index=False, float_format="%.4g")
    return table, path


if __name__ == "__main__":
    main()
