"""Experiment loggers: Weights & Biases (offline by default) or none.

The local records (``run_records``) are always written; a logger mirrors the same rows. W&B runs
offline unless ``logger.mode=online`` — then ``wandb sync`` is never needed and tests never touch
the network.
"""
from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Protocol

from fedbn_bench.records.atomic import atomic_write_text


class Logger(Protocol):
    def log(self, row: dict[str, Any], step: int) -> None: ...

    def finish(self, summary: dict[str, Any]) -> None: ...


class NullLogger:
    def log(self, row: dict[str, Any], step: int) -> None:
        pass

    def finish(self, summary: dict[str, Any]) -> None:
        pass


class WandbLogger:
    """Mirrors the evaluation rows and the summary to a W&B run stored in ``run_dir/wandb``; its id
    is kept in ``run_dir/wandb_id``, so a resumed run continues the same W&B run."""

    def __init__(self, cfg: Any, run_dir: Path, config: dict[str, Any], name: str) -> None:
        import wandb

        self._wandb = wandb
        self.run = wandb.init(
            id=run_id(run_dir),
            resume="allow",
            project=cfg.project,
            entity=cfg.entity,
            mode=cfg.mode,
            group=cfg.group,
            tags=list(cfg.tags),
            dir=str(run_dir),
            name=name,
            config=config,
            settings=wandb.Settings(silent=True, console="off"),
            reinit="create_new",  # replicas=k: k runs open at once in one process
        )

    def log(self, row: dict[str, Any], step: int) -> None:
        self.run.log(row, step=step)

    def finish(self, summary: dict[str, Any]) -> None:
        self.run.summary.update(summary)
        self.run.finish(exit_code=0 if summary.get("status") == "completed" else 1)


def run_id(run_dir: Path) -> str:
    """The W&B run id kept in ``run_dir/wandb_id`` (a new random one, written atomically, the first time)."""
    path = run_dir / ID_FILE
    if not path.exists():
        atomic_write_text(path, secrets.token_hex(4) + "\n")
    return path.read_text().strip()


ID_FILE = "wandb_id"
LOGGERS = ("wandb", "none")


def make_logger(cfg: Any, run_dir: Path, config: dict[str, Any], name: str) -> Logger:
    """The logger named by ``cfg.name`` (``wandb`` or ``none``)."""
    if cfg.name == "none":
        return NullLogger()
    return WandbLogger(cfg, run_dir, config, name)
