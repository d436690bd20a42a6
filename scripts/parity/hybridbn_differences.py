"""Measure, without training, the differences between the HBN authors' code (HybridBN) and ours that
results/parity/README.md ("Why ours learned faster early") lists, on Fashion-MNIST, K = 100 clients, 10 per
round, Dirichlet alpha = 0.1, B = 4:

1. local steps per round: THEIR ``DatasetDivide`` (imported from ``--code``) against our ``partition=dirichlet``
   (``min_size=0``), over ``--draws`` partition draws and 200 client samples each, for the 60,000 Fashion-MNIST
   training images and for 50,000 (what five CIFAR batch files of 10,000 hold);
2. HBN's statistics batch (the client's first 64 samples, their ``FedHBN/clients.py`` ``buffer_update``):
   total-variation distance between its class histogram and the client's, their index order (class by class)
   against ours (dataset order);
3. the input: Fashion-MNIST packed as CIFAR (zero-padded to 32 x 32, 3 equal channels) through their CIFAR
   ``Normalize`` constants against ours (standardized with the training set's statistics), and the per-channel
   mean and variance of a freshly initialised first convolution's output (FBN and HBN start their global
   statistics at 0 and 1).

    python scripts/parity/hybridbn_differences.py --code /tmp/HybridBN
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from fedbn_bench.partition.dirichlet import dirichlet  # noqa: E402

CLIENTS, PER_ROUND, BATCH, ALPHA, STATS_BATCH = 100, 10, 4, 0.1, 64
CIFAR_MEAN, CIFAR_STD = torch.tensor([0.4914, 0.4822, 0.4465]), torch.tensor([0.2023, 0.1994, 0.2010])
"""Their CIFAR ``Normalize`` constants (FedBaseline/sampling/dataLoader.py)."""


class Labels:
    """What their ``DatasetDivide`` reads of a data set: ``targets`` and its length."""

    def __init__(self, labels: torch.Tensor) -> None:
        self.targets = labels.tolist()

    def __len__(self) -> int:
        return len(self.targets)


def their_partition(labels: torch.Tensor, seed: int) -> list[np.ndarray]:
    """Each client's indices in their order, from their ``DatasetDivide`` (numpy's global stream seeded)."""
    from FedBaseline.sampling.sampling import DatasetDivide

    np.random.seed(seed)
    args = argparse.Namespace(num_users=CLIENTS, fed_name="fedavg", iid=False, dirichlet_alpha=ALPHA, num_classes=10)
    return [np.asarray(c.idxs, dtype=np.int64) for c in DatasetDivide(args, Labels(labels))]


def our_partition(labels: torch.Tensor, seed: int) -> list[np.ndarray]:
    """Each client's indices in our order (ascending), from ``partition=dirichlet`` with ``min_size=0``."""
    parts = dirichlet(labels, CLIENTS, torch.Generator().manual_seed(seed), alpha=ALPHA, min_size=0)
    return [p.numpy() for p in parts]


def steps_per_round(parts: list[list[np.ndarray]], rng: np.random.Generator) -> tuple[float, float]:
    """Mean and sd of a round's local steps (one epoch, ``drop_last``) over the draws and 200 client samples each."""
    totals = [sum(len(p[c]) // BATCH for c in rng.choice(CLIENTS, PER_ROUND, replace=False))
              for p in parts for _ in range(200)]
    return float(np.mean(totals)), float(np.std(totals))


def statistics_batch_bias(parts: list[list[np.ndarray]], labels: np.ndarray) -> float:
    """Mean total-variation distance between the class histogram of a client's first 64 samples and the client's."""
    distances = []
    for part in parts:
        for idx in part:
            if len(idx) < BATCH:
                continue
            whole = np.bincount(labels[idx], minlength=10) / len(idx)
            first = np.bincount(labels[idx[:STATS_BATCH]], minlength=10) / len(idx[:STATS_BATCH])
            distances.append(0.5 * np.abs(whole - first).sum())
    return float(np.mean(distances))


def compare_partitions(labels: torch.Tensor, draws: int) -> None:
    rng = np.random.default_rng(0)
    for n in (60000, 50000):
        for name, partition in (("theirs", their_partition), ("ours", our_partition)):
            mean, sd = steps_per_round([partition(labels[:n], s) for s in range(draws)], rng)
            print(f"1. N = {n}, {name:6s}: local steps per round {mean:.0f} (sd {sd:.0f} over rounds and draws)")
    for name, partition in (("theirs", their_partition), ("ours", our_partition)):
        bias = statistics_batch_bias([partition(labels, s) for s in range(draws)], labels.numpy())
        print(f"2. {name:6s}: HBN statistics batch vs client, class total-variation distance {bias:.2f}")


def input_statistics(images: torch.Tensor) -> None:
    x = F.pad(images.float().div(255), (2, 2, 2, 2))[:, None].expand(-1, 3, -1, -1)
    inputs: dict[str, torch.Tensor] = {
        "theirs (CIFAR Normalize)": (x - CIFAR_MEAN.view(1, 3, 1, 1)) / CIFAR_STD.view(1, 3, 1, 1),
        "ours (standardized)": (x - x.mean()) / x.std()}
    torch.manual_seed(0)
    convs = [torch.nn.Conv2d(3, 16, 3, padding=1) for _ in range(20)]
    for name, inp in inputs.items():
        with torch.no_grad():
            out = [conv(inp[:2000]) for conv in convs]
        mean = np.mean([o.mean((0, 2, 3)).abs().mean().item() for o in out])
        var = np.mean([o.var((0, 2, 3)).mean().item() for o in out])
        print(f"3. {name}: input mean {inp.mean().item():+.2f}, sd {inp.std().item():.2f}, black "
              f"{inp.min().item():+.2f}; conv1 output at init: mean |channel mean| {mean:.2f}, mean variance {var:.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", required=True, type=Path, help="a HybridBN checkout")
    parser.add_argument("--data", type=Path, default=ROOT / "data", help="torchvision root holding FashionMNIST/")
    parser.add_argument("--draws", type=int, default=20, help="partition draws (seeds) per side")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.code.resolve()))
    import torchvision

    train = torchvision.datasets.FashionMNIST(str(args.data), train=True, download=False)
    compare_partitions(train.targets, args.draws)
    input_statistics(train.data)


if __name__ == "__main__":
    main()
