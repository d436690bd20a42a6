"""The claim of a run directory by the live run that writes it: no two runs ever write one directory.

A run takes ``<run dir>/.run.lock`` with ``O_CREAT | O_EXCL`` (atomic: of two runs started at the
same moment in one directory, exactly one gets it) before Hydra writes anything there, and removes
it when it ends (``run.py``). The file says who holds it (process id, host, SLURM job id, start
time). A run that finds it held is refused with one ``error:`` line naming the holder, unless the
holder is dead (a process of this host that no longer exists, or a SLURM job ``squeue`` says ended, e.g.
one killed on another node: its stale lock is named and taken over) or is this very SLURM job before its
requeue (a requeued job takes its own directory back).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

from fedbn_bench.errors import UserError

LOCK = ".run.lock"
SLURM_ENDED = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
"""``squeue`` states of a SLURM job that runs no more."""


class DirectoryInUse(UserError):
    """Another live run holds the directory."""


def _me() -> dict[str, Any]:
    return {"pid": os.getpid(), "host": socket.gethostname(), "slurm_job_id": slurm_job_id(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S")}


def slurm_job_id() -> Optional[str]:
    """This process's SLURM job (``<array job>_<task>`` for an array task), ``None`` outside SLURM."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{task}" if array and task else os.environ.get("SLURM_JOB_ID")


def holder(run_dir: str | Path) -> Optional[dict[str, Any]]:
    """Who holds ``run_dir`` (the lock's content; ``{}`` when unreadable), ``None`` when no one does."""
    try:
        return json.loads((Path(run_dir) / LOCK).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}


def describe(owner: dict[str, Any]) -> str:
    """``process 12 on host vm (SLURM job 7), started ...`` for a lock's content."""
    job = f" (SLURM job {owner['slurm_job_id']})" if owner.get("slurm_job_id") else ""
    return f"process {owner.get('pid', '?')} on host {owner.get('host', '?')}{job}, started {owner.get('started', '?')}"


def _replaceable(owner: dict[str, Any]) -> Optional[str]:
    """Why the lock of ``owner`` may be taken over (``None``: it may not, its run is alive)."""
    mine = _me()
    if owner.get("slurm_job_id") and owner["slurm_job_id"] == mine["slurm_job_id"]:
        return "this SLURM job before its requeue"
    if owner.get("host") == mine["host"] and isinstance(owner.get("pid"), int):  # this host's process says
        return None if _alive(owner["pid"]) else "a stale lock: that process no longer exists"
    if owner.get("slurm_job_id") and slurm_job_ended(owner["slurm_job_id"]):
        return f"a stale lock: SLURM job {owner['slurm_job_id']} is no longer running"
    return None


def slurm_job_ended(job_id: str) -> bool:
    """Whether ``squeue`` says SLURM job ``job_id`` runs no more (not listed, or in an ended state); ``False``
    where it cannot say (no ``squeue`` here, the controller not answering)."""
    try:
        listed = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    if listed.returncode != 0:
        return "Invalid job id" in listed.stderr
    states = listed.stdout.split()
    return not states or all(state in SLURM_ENDED for state in states)


def live_holder(run_dir: str | Path) -> Optional[str]:
    """Who, other than this process, holds ``run_dir`` with a live run (``describe``'s line), else ``None``."""
    owner = holder(run_dir)
    if not owner or (owner.get("pid") == os.getpid() and owner.get("host") == socket.gethostname()):
        return None
    return None if _replaceable(owner) else describe(owner)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def acquire(run_dir: str | Path) -> None:
    """Claim ``run_dir`` for this process (module docstring); raises ``DirectoryInUse`` naming the
    live holder. A lock taken over is named on stderr."""
    path = Path(run_dir) / LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            owner = holder(run_dir)
            if owner is None:
                continue
            if owner.get("pid") == os.getpid() and owner.get("host") == socket.gethostname():
                return
            reason = _replaceable(owner)
            if reason is None:
                raise DirectoryInUse(f"{shown(run_dir)} is in use by another run ({describe(owner)}); wait for it "
                                     f"to end or choose another directory (if that run is dead, remove {path})")
            print(f"note: {path} taken over from {describe(owner)}: {reason}", file=sys.stderr)
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as lock:
            json.dump(_me(), lock)
        return
    raise DirectoryInUse(f"{shown(run_dir)}: its lock {path} changed hands three times while it was claimed; try again")


def shown(run_dir: str | Path) -> str:
    """``run_dir`` as a message names it: relative to the working directory when inside it, so that the same
    directory reads the same whichever step (before or after Hydra made it absolute) found it taken."""
    path = Path(run_dir).absolute()
    try:
        relative = path.relative_to(Path.cwd())
    except ValueError:
        return str(run_dir)
    return str(relative) if relative.parts else str(run_dir)


def release(run_dir: str | Path) -> None:
    """Remove this process's claim of ``run_dir`` (nothing if another process holds it)."""
    owner = holder(run_dir)
    if owner and owner.get("pid") == os.getpid() and owner.get("host") == socket.gethostname():
        (Path(run_dir) / LOCK).unlink(missing_ok=True)
