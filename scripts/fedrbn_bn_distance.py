"""How far apart each FedRBN user's clean (BN_c) and adversarial (BN_a) running statistics are in a run's final
state: the diagnosis of claim fedrbn/table1_bna_over_bnc (BN_c keeps the robust accuracy; does BN_a carry anything
BN_c does not?). FedRBN §4: an AT user's BN_a holds the statistics of its PGD inputs, BN_c those of its clean
inputs; an ST user's BN_a is propagated from the AT users (``norms/fedrbn.py``).

    python scripts/fedrbn_bn_distance.py RUN_DIR [RUN_DIR ...]    (reads RUN_DIR/checkpoint.pt)

Per run, role (adversarial / standard users) and dual-BN layer, the mean over that role's users of

- ``shift``: the channel mean of |μ_a − μ_c| / σ_c, BN_a's mean shift in units of BN_c's standard deviation
  (0: the same centering; 1: a feature moved by one standard deviation after normalization);
- ``scale``: the channel mean of σ_a / σ_c (1: the same spread),

with σ = sqrt(running variance + 1e-5), BN's ε. Printed as a Markdown table (``--csv FILE`` also writes it).
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any, Mapping

import torch

from fedbn_bench.engine.checkpoint import load_checkpoint
from fedbn_bench.engine.store_packing import unpack_store
from fedbn_bench.errors import ConfigError

EPS = 1e-5
"""BN's ε (``DualBatchNorm``'s default), added to a variance before its square root."""
COLUMNS = ("run", "role", "layer", "users", "shift", "scale")


def dual_layers(local: Mapping[str, torch.Tensor]) -> list[str]:
    """The dual-BN layers of one user's local state: those holding ``running_*`` and ``adv_running_*``."""
    return [key.removesuffix(".adv_running_mean") for key in local if key.endswith(".adv_running_mean")]


def layer_distance(local: Mapping[str, torch.Tensor], layer: str) -> tuple[float, float]:
    """``(shift, scale)`` of one user's ``layer`` (module docstring)."""
    mean_c, mean_a = local[f"{layer}.running_mean"].double(), local[f"{layer}.adv_running_mean"].double()
    std_c = (local[f"{layer}.running_var"].double() + EPS).sqrt()
    std_a = (local[f"{layer}.adv_running_var"].double() + EPS).sqrt()
    return ((mean_a - mean_c).abs() / std_c).mean().item(), (std_a / std_c).mean().item()


def distances(store: Mapping[str, Any], run: str = "") -> list[dict[str, Any]]:
    """One row per role and layer of a checkpoint's client store (``ClientStore.state_dict``)."""
    by_role: dict[str, list[Mapping[str, torch.Tensor]]] = {}
    store = unpack_store(store)
    for record, local in zip(store["records"], store["client_local"]):
        by_role.setdefault(record["role"], []).append(local)
    rows = []
    for role, locals_ in sorted(by_role.items()):
        for layer in dual_layers(locals_[0]):
            pairs = [layer_distance(local, layer) for local in locals_]
            rows.append({"run": run, "role": role, "layer": layer, "users": len(pairs),
                         "shift": sum(p[0] for p in pairs) / len(pairs), "scale": sum(p[1] for p in pairs) / len(pairs)})
    if not rows:
        raise SystemExit(f"error: {run or 'the checkpoint'} holds no dual-BN statistics (a norm=fedrbn or dbn run?)")
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---|---|---|---:|---:|---:|"]
    lines += [f"| {r['run']} | {r['role']} | {r['layer']} | {r['users']} | {r['shift']:.3f} | {r['scale']:.3f} |"
              for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories holding checkpoint.pt")
    parser.add_argument("--csv", type=Path, help="also write the rows to this CSV file")
    args = parser.parse_args(argv)
    try:
        rows = [row for run in args.runs for row in distances(load_checkpoint(run)["store"], str(run))]
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(markdown(rows))
    if args.csv:
        with args.csv.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
