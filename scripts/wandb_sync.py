"""Upload the offline W&B runs of fedbn-bench: ``python scripts/wandb_sync.py [DIR ...] [--dry-run]``.

Each run keeps its W&B files in ``<run dir>/wandb/offline-run-*`` (``logger.mode=offline``, the
default), where ``wandb sync`` run from the repository root does not look. This finds every such
folder under the given directories (default: ``outputs`` and ``multirun``) and passes them to
``wandb sync``; ``--dry-run`` prints the command instead (docs/wandb.md).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path


def offline_runs(roots: list[Path]) -> list[Path]:
    """Every ``wandb/offline-run-*`` folder under ``roots``, in path order."""
    return sorted(p for root in roots if root.is_dir() for p in root.glob("**/wandb/offline-run-*") if p.is_dir())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="*", type=Path, default=[Path("outputs"), Path("multirun")],
                        help="run or sweep directories to search (default: outputs multirun)")
    parser.add_argument("--dry-run", action="store_true", help="print the wandb sync command, upload nothing")
    args = parser.parse_args(argv)
    runs = offline_runs(args.dirs)
    if not runs:
        print(f"error: no offline W&B run (wandb/offline-run-*) under {' '.join(map(str, args.dirs))}", file=sys.stderr)
        return 2
    command = [shutil.which("wandb") or str(Path(sys.executable).with_name("wandb")), "sync", *map(str, runs)]
    if args.dry_run:
        print(f"{len(runs)} offline run(s):", " ".join(command[1:]))
        return 0
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
