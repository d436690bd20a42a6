"""Experiment loggers: Weights & Biases (offline by default) or none.

The local records (``run_records``) are always written; a logger mirrors the same rows. W&B runs
offline unless ``logger.mode=online`` — then ``wandb sync`` is never needed and tests never touch
the network.
"""
from __future__ import annotations

import netrc
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Any, Optional, Protocol
from urllib.parse import urlparse

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
        drop_earlier_segments(Path(self.run.dir).parent, self.run.id)

    def log(self, row: dict[str, Any], step: int) -> None:
        self.run.log(row, step=step)

    def finish(self, summary: dict[str, Any]) -> None:
        self.run.summary.update(summary)
        self.run.finish(exit_code=0 if summary.get("status") == "completed" else 1)


def drop_earlier_segments(current: Path, run: str) -> None:
    """Remove the W&B folders of run ``run`` that earlier processes wrote beside ``current`` (this process's
    ``wandb/offline-run-<time>-<run>``, with ``-<n>`` appended by W&B when a folder of that second exists): a
    resumed run logs its whole history again (``RunLoop.restore``), so its newest folder holds everything, and a
    run keeps one folder across resumes for ``wandb sync`` to upload."""
    for earlier in current.parent.glob("*-run-*"):
        if earlier != current and earlier.is_dir() and re.fullmatch(rf".*-run-.*-{re.escape(run)}(-\d+)?",
                                                                       earlier.name):
            shutil.rmtree(earlier, ignore_errors=True)


def run_id(run_dir: Path) -> str:
    """The W&B run id kept in ``run_dir/wandb_id`` (a new random one, written atomically, the first time)."""
    path = run_dir / ID_FILE
    if not path.exists():
        atomic_write_text(path, secrets.token_hex(4) + "\n")
    return path.read_text().strip()


ID_FILE = "wandb_id"
LOGGERS = ("wandb", "none")


def wandb_login_missing(cfg: Any) -> Optional[str]:
    """The error for ``logger.mode=online`` without W&B credentials (``WANDB_API_KEY``, or the entry
    ``wandb login`` writes to ``~/.netrc`` for the W&B host); ``None`` when the logger needs none or has them."""
    if cfg.name != "wandb" or cfg.mode != "online" or os.environ.get("WANDB_API_KEY"):
        return None
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    try:
        if netrc.netrc(os.environ.get("NETRC")).authenticators(host):
            return None
    except (OSError, netrc.NetrcParseError):
        pass
    return (f"logger.mode=online needs a W&B login for {host}, and none is set up (no WANDB_API_KEY, no ~/.netrc "
            "entry); allowed without one: logger.mode=offline (python scripts/wandb_sync.py uploads it later), "
            "logger=none; or run `wandb login` first")


def make_logger(cfg: Any, run_dir: Path, config: dict[str, Any], name: str) -> Logger:
    """The logger named by ``cfg.name`` (``wandb`` or ``none``)."""
    if cfg.name == "none":
        return NullLogger()
    return WandbLogger(cfg, run_dir, config, name)
