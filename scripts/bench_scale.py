"""``python scripts/bench.py --scale``: what a round costs as the federation grows (issue 58).

For each method (FedAvg + BN, FedBN, SCAFFOLD + BN) and federation size N (default 100, 1,000 and
10,000 clients of Fashion-MNIST under ``data/``, Dirichlet α = 0.3 with the scaling defaults:
``partition.min_size=auto``, ``small_clients=cycle``), with 10 clients a round, ``local_steps``
fixed local steps each and the default evaluation (``evaluation.clients=100``), one fresh process
measures: ``setup_s`` (the run built: data, partition, per-client state, model, engine),
``round_s`` (median of the timed training rounds after one untimed), ``eval_s`` (one
evaluation), ``checkpoint_s`` (one checkpoint of the whole store), ``client_state_mb`` (the
clients' own state: local keys and algorithm state, after the rounds) and ``peak_rss_mb`` (the
process's peak resident set, Python and torch included). Each row's ``round_vs_n100``,
``eval_vs_n100`` and ``setup_s`` are the figures of the issue's targets (a round within 1.5× and an
evaluation within 2× of N = 100, setup under 30 s). Written to ``results/bench/scale.csv``.
"""
from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
METHODS = {"fedavg_bn": ["norm=bn", "algo=fedavg"], "fedbn": ["norm=fedbn", "algo=fedavg"],
           "scaffold_bn": ["norm=bn", "algo=scaffold"]}


def measure(method: str, clients: int, rounds: int, local_steps: int) -> dict:
    """One configuration's row, measured in this process."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from fedbn_bench.config.schema import register_schemas
    from fedbn_bench.runner import build_simulation, resolve_device

    register_schemas()
    overrides = ["logger=none", "progress=false", "dataset=fashion_mnist", "partition=dirichlet", "alpha=0.3",
                 f"num_clients={clients}", "clients_per_round=10", f"algo.local_steps={local_steps}",
                 f"rounds={rounds + 1}", "checkpoint_every=0", "small_clients=cycle", *METHODS[method]]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    torch.set_num_threads(int(torch.get_num_threads()))
    run_dir = tempfile.mkdtemp()
    t0 = time.perf_counter()
    sim = build_simulation(cfg, run_dir, resolve_device("cpu"), OmegaConf.to_container(cfg, resolve=True))
    setup = time.perf_counter() - t0
    times = []
    for r in range(rounds + 1):
        t0 = time.perf_counter()
        sim.run_round(r)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    sim.evaluator.evaluate(round_number=rounds + 1)
    evaluation = time.perf_counter() - t0
    t0 = time.perf_counter()
    sim.loop.rounds_completed = rounds + 1
    sim.loop.checkpoint()
    checkpoint = time.perf_counter() - t0
    return {"method": method, "num_clients": clients, "setup_s": setup, "round_s": statistics.median(times[1:]),
            "eval_s": evaluation, "checkpoint_s": checkpoint, **sim.store.memory.describe(),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "evaluation": sim.evaluator.describe(), "threads": torch.get_num_threads()}


def bench_scale(sizes: list[int], methods: list[str], rounds: int, local_steps: int, out: Path) -> pd.DataFrame:
    """Every (method, N) in a fresh process; the table with the ratios to N = the smallest size."""
    rows = []
    for method in methods:
        for n in sizes:
            child = subprocess.run([sys.executable, __file__, "--child", method, str(n), str(rounds), str(local_steps)],
                                   capture_output=True, text=True, check=True)
            rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    base = table[table.num_clients == min(sizes)].set_index("method")
    table["round_vs_n100"] = table.round_s / table.method.map(base.round_s)
    table["eval_vs_n100"] = table.eval_s / table.method.map(base.eval_s)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "scale.csv", index=False, float_format="%.4g")
    return table


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    method, n, rounds, steps = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    print(json.dumps(measure(method, n, rounds, steps)))
