"""``python run.py --help``: what the app does, its config groups with their choices (read from
``conf/``, so the list cannot go stale) and the short top-level keys; no internal groups (the
schemas, the parts that presets compose, Hydra's own). Hydra's help stays at ``--hydra-help``."""
from __future__ import annotations

import textwrap
from pathlib import Path

from fedbn_bench.config.choices import public_groups, user_choices

GROUPS = {
    "dataset": "the data (docs/DATASETS.md)",
    "partition": "how the training data is split among clients",
    "model": "the architecture; it takes the norm's layers",
    "norm": "the normalization method (docs/methods.md)",
    "algo": "the FL algorithm: client update and server update",
    "aggregator": "how the server combines weights and statistics",
    "byzantine": "Byzantine clients and the server's defense (FBN §5)",
    "adversarial": "adversarial training and robust accuracy (FedRBN)",
    "engine": "how clients are trained: one by one (loop) or stacked (vmap, packed); auto picks",
    "logger": "Weights & Biases (offline by default) or none; local records are always written",
    "preset": "a paper's optimizer and training details",
    "experiment": "a paper's figure or table (docs/reproducing.md)",
    "scale": "smoke: any preset at a tiny scale (1 round, 1 local step)",
    "debug": "default: any run made tiny (a few seconds) to check a config",
}
"""One line per public group of ``conf/``; ``tests/test_user_errors.py`` checks that none is missing."""

KEYS = ("seed", "rounds", "num_clients", "clients_per_round", "batch_size", "lr", "alpha", "gamma",
        "replicas", "eval_every", "device")
"""The short top-level keys worth listing (``conf/config.yaml`` has them all, with comments)."""

HEADER = """fedbn-bench: simulate federated learning with a choice of normalization, algorithm, data and
partition; every run writes metrics.csv, summary.json and its config to its output directory.

Usage:
  python run.py [GROUP=CHOICE ...] [KEY=VALUE ...]        one run (outputs/<date>/<time>_.../)
  python run.py -m GROUP=A,B KEY=1,2 ...                  a sweep, one run per combination (multirun/...)

Examples:
  python run.py norm=fbn partition=dirichlet alpha=0.1
  python run.py -m norm=bn,fbn,hbn seed=0,1,2
  python run.py -m experiment=fbn/fig3a_fmnist
  python run.py debug=default dataset=fashion_mnist
"""

FOOTER = """More: python run.py --cfg job [overrides] prints the composed config; conf/config.yaml lists
every key; README.md and docs/ explain the methods; --hydra-help shows Hydra's own options."""


def help_text(conf_dir: Path) -> str:
    """The text ``python run.py --help`` prints."""
    lines = [HEADER, "Config groups (GROUP=CHOICE):"]
    for group in public_groups(conf_dir):
        lines.append(f"  {group}: {GROUPS[group]}")
        choices = user_choices(conf_dir, group)
        lines += textwrap.wrap(", ".join(choices), width=100, initial_indent="      ", subsequent_indent="      ",
                               break_on_hyphens=False)
    lines += ["", "Short keys (KEY=VALUE): " + ", ".join(KEYS), "", FOOTER]
    return "\n".join(lines)
