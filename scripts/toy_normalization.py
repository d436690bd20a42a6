"""FBN paper Fig. 1 and Fig. 2 on the 2-D Gaussian toy (fbn_federated_batchnorm.txt §3-4).

Writes into ``--out`` (default results/fbn/toy/):

* ``fig1_centralized_vs_naive.png`` — one round of m=30 points per client, γ=0: centralized BN (a)
  and naive per-client BN (b); dots are the raw points, crosses the normalized ones.
* ``fig2ab_fbn_fixbn.png`` — FBN (a) and FixBN (b) after ``--rounds`` rounds (γ=0, β=0.1).
* ``fig2c_normalization_error.png`` and ``normalization_error.csv`` (``method, heterogeneity,
  error``): the per-round mean Euclidean distance to centralized BN's normalized points, averaged
  over all rounds (the paper's definition). ``heterogeneity = 1 - γ`` (0 iid, 1 one class per client).
* ``normalization_error_by_round.csv`` (``method, gamma, heterogeneity, round, error``).

Usage: ``python scripts/toy_normalization.py [--rounds 100] [--beta 0.1] [--seed 0] [--out DIR]``.
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fedbn_bench.toy.normalization import METHODS, ToyRun, run_toy  # noqa: E402

GAMMAS = (1.0, 0.5, 0.3, 0.1, 0.01, 0.0)
LABELS = {"naive": "Naive BatchNorm", "fixbn": "FixBN", "fbn": "FBN"}


def scatter(ax, run: ToyRun, normalized, title: str) -> None:
    """Raw points as dots and normalized points as crosses, one color per class."""
    colors = plt.get_cmap("tab10")(run.labels.numpy() % 10)
    ax.scatter(run.raw[:, 0], run.raw[:, 1], c=colors, s=6, marker="o", alpha=0.5)
    ax.scatter(normalized[:, 0], normalized[:, 1], c=colors, s=14, marker="+")
    ax.set_title(title)
    ax.set_aspect("equal")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--beta", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/fbn/toy"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    first = run_toy("naive", 0.0, rounds=1, beta=args.beta, seed=args.seed)
    fig, axes = plt.subplots(1, 2, figsize=(10, 5))
    scatter(axes[0], first, first.centralized, "(a) centralized BatchNorm")
    scatter(axes[1], first, first.federated, "(b) Naive BatchNorm, one class per client")
    fig.savefig(args.out / "fig1_centralized_vs_naive.png", dpi=120, bbox_inches="tight")
    plt.close(fig)

    runs = {(m, g): run_toy(m, g, rounds=args.rounds, beta=args.beta, seed=args.seed) for m in METHODS for g in GAMMAS}

    fig, axes = plt.subplots(1, 2, figsize=(10, 5))
    for ax, method, tag in zip(axes, ("fbn", "fixbn"), "ab"):
        scatter(ax, runs[method, 0.0], runs[method, 0.0].federated, f"({tag}) {LABELS[method]}, round {args.rounds}")
    fig.savefig(args.out / "fig2ab_fbn_fixbn.png", dpi=120, bbox_inches="tight")
    plt.close(fig)

    with open(args.out / "normalization_error.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["method", "heterogeneity", "error"])
        for (method, gamma), run in runs.items():
            writer.writerow([method, round(1 - gamma, 6), f"{run.errors.mean().item():.6g}"])
    with open(args.out / "normalization_error_by_round.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["method", "gamma", "heterogeneity", "round", "error"])
        for (method, gamma), run in runs.items():
            for t, err in enumerate(run.errors.tolist(), start=1):
                writer.writerow([method, gamma, round(1 - gamma, 6), t, f"{err:.6g}"])

    fig, ax = plt.subplots(figsize=(6, 4))
    for method in METHODS:
        xs = [1 - g for g in GAMMAS]
        ys = [runs[method, g].errors.mean().item() for g in GAMMAS]
        ax.plot(xs, ys, marker="o", label=LABELS[method])
    ax.set_xlabel("heterogeneity 1 - γ")
    ax.set_ylabel(f"normalization error (mean over {args.rounds} rounds)")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("(c) distance to centralized BatchNorm")
    fig.savefig(args.out / "fig2c_normalization_error.png", dpi=120, bbox_inches="tight")
    plt.close(fig)


if __name__ == "__main__":
    main()
