"""Which memory pool lets the graphed local steps capture on this GPU (issue 51)? On torch 2.11 (H200) the second
round's capture into the run's shared ``torch.cuda.MemPool`` failed in ``capture_begin`` with the host
allocator's ``use_count > 0`` assertion (results/bench/gpu_check.log): the first round's graphs, the pool's
only users on the host side, had been dropped. Each variant runs in its own process (a failed
capture can abort the process), trains the default run's first rounds with ``engine.cuda_graphs=auto`` and
prints one line: what the graphs ran, the largest difference from an eager run and the memory reserved after
each round. ``torch`` first: the same capture in plain PyTorch, without the project.

    python scripts/gpu_pool_probe.py [--rounds 4] [--out results/bench/gpu_pool_probe.txt]

``scripts/gpu_check.sh`` runs it first (the project's own pool, ``step_graph.AnchoredPool``, is what
``scripts/gpu_graphs_check.py`` runs next).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {
    "torch_mempool": "plain torch: capture, drop, capture again into one torch.cuda.MemPool().id",
    "torch_handle": "plain torch: the same into one torch.cuda.graph_pool_handle()",
    "torch_anchor": "plain torch: the same into one graph_pool_handle(), an anchor graph held throughout",
    "private": "the default run, each graph its own private pool (pool=None; the alternative to the anchor)",
}


def plain_torch(kind: str) -> str:
    import torch

    pool = torch.cuda.MemPool().id if kind == "torch_mempool" else torch.cuda.graph_pool_handle()
    stream, x = torch.cuda.Stream(), torch.ones(8, device="cuda")

    def captured(scale: float):
        graph = torch.cuda.CUDAGraph()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            (x * scale).sum()
            graph.capture_begin(pool=pool)
            out = (x * scale).sum()
            graph.capture_end()
        torch.cuda.current_stream().wait_stream(stream)
        graph.replay()
        torch.cuda.synchronize()
        return graph, out.item()

    anchor = captured(1.0) if kind == "torch_anchor" else None
    sums = []
    for scale in (2.0, 3.0):  # a round's graph, dropped before the next round captures
        graph, out = captured(scale)
        sums.append(out)
        del graph
    return f"captured, dropped and captured again: sums {sums} (anchor held: {anchor is not None})"


def project(kind: str, rounds: int) -> str:
    import torch

    sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT / "scripts")]
    from fedbn_bench.engine import graphs
    from fedbn_bench.engine.backends import stacked
    from fedbn_bench.engine.step_graph import CudaStepGraph
    import gpu_graphs_check as check

    def private_pools(mode: str, device: torch.device):
        stream = torch.cuda.Stream(device)
        return lambda: CudaStepGraph(stream, None)

    stacked.step_graph_maker = graphs.step_graph_maker = private_pools
    device = torch.device("cuda")
    _, eager, _ = check.train("default", "off", rounds, device)
    reserved: list[float] = []
    sim, graphed, _ = check.train("default", "auto", rounds, device,
                                  lambda r: reserved.append(round(torch.cuda.memory_reserved() / 2**20, 1)))
    record, diff = sim.graph_record, check.largest_difference(eager, graphed)
    return (f"replayed {record.rounds_replayed} eager {record.rounds_eager} replays {record.replays} "
            f"reasons {dict(record.eager_reasons)} max diff {max(diff.values()):.3g} reserved MiB {reserved}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        print(plain_torch(args.variant) if args.variant.startswith("torch") else project(args.variant, args.rounds))
        return 0
    lines = []
    for name, what in VARIANTS.items():
        with tempfile.TemporaryFile("w+") as log:
            try:
                done = subprocess.run([sys.executable, __file__, "--variant", name, "--rounds", str(args.rounds)],
                                      stdout=log, stderr=subprocess.STDOUT, timeout=40)
                code = done.returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
            log.seek(0)
            text = log.read().strip().splitlines()
        errors = [t for t in text if "Error" in t or "ASSERT" in t]
        lines.append(f"{name} ({what}): exit {code}: {text[-1] if text else ''}"
                     + (f" | first error: {errors[0]}" if errors and code != 0 else ""))
        print(lines[-1], flush=True)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
