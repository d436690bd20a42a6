"""Refresh ``results/claims/declared.json`` from git, then regenerate ``results/CLAIMS.md``, the claim charts
(``results/claims/``) and the claims table of docs/claims.md from the committed run records: ``python
scripts/claims.py`` (``--check``: compare with the committed record, exit 1 on a difference; ``--list``: the
verdicts). Claims: ``src/fedbn_bench/figures/claims/<paper>.py``."""
from __future__ import annotations

import sys
from pathlib import Path

from fedbn_bench.figures.claims.cli import main

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    sys.exit(main(repo=ROOT))
