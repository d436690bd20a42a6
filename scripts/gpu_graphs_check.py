"""Are CUDA graphs safe on this GPU? Each case trains the same rounds with ``engine.cuda_graphs=off``
twice and with ``auto`` once, in float32 on the device, and compares the final global states.

Two eager runs of the same rounds differ only by the GPU's non-deterministic kernels (atomics in
cuDNN's backward); the graphed run passes when it is as close to the first eager run as the second
is, or within ``rtol`` 1e-6: ``graphed`` ≤ max(4 × ``eager noise``, 1e-6 × the tensor's largest value).
Each case also prints what the graphs ran (rounds replayed or eager and why, replays) and
``torch.cuda.memory_reserved`` after each graphed round, which must stay flat. One CSV row per case,
written as soon as the case ends (``--out``), so a time limit loses no finished row.

    python scripts/gpu_graphs_check.py --out results/bench/gpu_graphs_check.csv
    python scripts/gpu_graphs_check.py --device cpu --cases default --rounds 2   # the script's own logic
"""
from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT / "scripts")]

from conftest import build_simulation  # noqa: E402  (the tests' builder: the config on a device and dtype)

SMALL = ["model=simple_cnn", "num_clients=6", "clients_per_round=3", "batch_size=16", "alpha=0.3", "lr=0.05",
         "algo.local_steps=6"]
CASES: dict[str, tuple[list[str], str]] = {
    "default": ([], "packed"),
    "vmap_hbn": ([*SMALL, "norm=hbn"], "vmap"),
    "hbn_mixing_fixed": ([*SMALL, "norm=hbn", "norm.mixing=fixed"], "packed"),
    "fbn_fedadam": ([*SMALL, "norm=fbn", "algo=fedadam"], "packed"),
    "hbn_cifar10": ([], "bench"),
}
"""name -> (overrides, engine): the default run (fbn_cnn's dropout, one local epoch of Dirichlet-sized
clients: unequal step counts), HBN on vmap, HBN's fixed mixing (Table 6), a server optimizer, and the
bench's HBN CIFAR-10 preset on packed (synthetic data, B = 4, one epoch of 500 samples)."""
FIELDS = ["case", "engine", "rounds", "max_graphed_diff", "max_eager_noise", "worst_key", "passed",
          "rounds_replayed", "rounds_eager", "replays", "eager_reasons", "reserved_mib_first", "reserved_mib_last",
          "eager_s_per_round", "graphed_s_per_round", "device", "torch"]


def simulation(case: str, mode: str, rounds: int, device: torch.device, run_dir: Path):
    overrides, engine = CASES[case]
    if engine == "bench":
        import bench

        preset = bench.PRESETS["hbn_cifar10"]
        cfg = bench.compose_config(preset, ["norm=hbn", "engine=packed", f"engine.cuda_graphs={mode}"])
        return bench.engine_rounds(preset, cfg, device, "packed", rounds)[0]
    return build_simulation(overrides, run_dir, rounds, torch.float32, engine, device=str(device), cuda_graphs=mode)


def train(case: str, mode: str, rounds: int, device: torch.device, on_round: Callable[[int], None] = lambda r: None):
    """``(simulation, final global state on the CPU, seconds per round)``."""
    sim = simulation(case, mode, rounds, device, Path(tempfile.mkdtemp()))
    start = time.perf_counter()
    for r in range(rounds):
        sim.run_round(r)
        on_round(r)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / rounds
    return sim, {k: v.detach().float().cpu() for k, v in sim.store.global_state.items()}, seconds


def largest_difference(a: dict, b: dict) -> dict[str, float]:
    return {k: (a[k] - b[k]).abs().max().item() for k in a if a[k].is_floating_point()}


def check(case: str, rounds: int, device: torch.device) -> dict:
    _, eager, eager_s = train(case, "off", rounds, device)
    _, again, _ = train(case, "off", rounds, device)
    reserved: list[float] = []

    def note(r: int) -> None:
        if device.type == "cuda":
            reserved.append(torch.cuda.memory_reserved(device) / 2**20)

    mode = "auto" if device.type == "cuda" else "emulate"
    sim, graphed, graphed_s = train(case, mode, rounds, device, note)
    noise, diff = largest_difference(eager, again), largest_difference(eager, graphed)
    bound = {k: max(4 * noise[k], 1e-6 * eager[k].abs().max().item()) for k in diff}
    worst = max(diff, key=lambda k: diff[k] - bound[k])
    record = sim.graph_record
    print(f"{case}: memory reserved after each graphed round (MiB): {[round(m, 1) for m in reserved]}", flush=True)
    return {"case": case, "engine": sim.engine, "rounds": rounds, "max_graphed_diff": max(diff.values()),
            "max_eager_noise": max(noise.values()), "worst_key": worst,
            "passed": all(diff[k] <= bound[k] for k in diff), "rounds_replayed": record.rounds_replayed,
            "rounds_eager": record.rounds_eager, "replays": record.replays,
            "eager_reasons": "; ".join(f"{r}: {n}" for r, n in record.eager_reasons.items()),
            "reserved_mib_first": reserved[0] if reserved else float("nan"),
            "reserved_mib_last": reserved[-1] if reserved else float("nan"),
            "eager_s_per_round": eager_s, "graphed_s_per_round": graphed_s, "device": str(device),
            "torch": torch.__version__}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {','.join(CASES)}")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--out", type=Path, help="CSV file, one row per case written as it ends")
    args = parser.parse_args()
    cases = args.cases.split(",")
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; allowed: {', '.join(CASES)}")
    device = torch.device(args.device)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w", newline="") as f:
            csv.DictWriter(f, FIELDS).writeheader()
    failed = []
    for case in cases:
        row = check(case, args.rounds, device)
        print({k: row[k] for k in FIELDS}, flush=True)
        if args.out:
            with args.out.open("a", newline="") as f:
                csv.DictWriter(f, FIELDS).writerow(row)
        if not row["passed"]:
            failed.append(case)
    print(f"graphs check: {'FAILED: ' + ', '.join(failed) if failed else 'passed'} ({len(cases)} cases)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
