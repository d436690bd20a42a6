"""What code made a run, for ``summary.json`` (issue 57 §1): the commit of the checkout the package runs from,
whether its code differed from that commit, and a hash of the difference, so that a record names the code that
wrote it and a replay (``records/replay.py``) knows what it compares against.

Only the code decides a run's numbers, so "dirty" looks at :data:`CODE` (tracked changes and untracked files);
the run records a sweep writes into ``results/`` never make a run dirty. Outside a git checkout (an installed
package) the record names the package version instead of a commit.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

CODE = ("src", "conf", "run.py", "pyproject.toml")
"""The paths, relative to the checkout, whose content makes a run's numbers."""
REPO = Path(__file__).resolve().parents[3]
"""The checkout this package runs from (``src/fedbn_bench/records/`` is three levels below it)."""


def _git(repo: Path, *args: str) -> Optional[str]:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def diff_digest(repo: Path) -> Optional[str]:
    """sha256 of the code's difference from ``HEAD`` (tracked changes, then each untracked file's path and bytes);
    ``None`` where the code equals ``HEAD``."""
    diff = _git(repo, "diff", "HEAD", "--binary", "--", *CODE) or ""
    untracked = (_git(repo, "ls-files", "--others", "--exclude-standard", "--", *CODE) or "").split()
    if not diff and not untracked:
        return None
    digest = hashlib.sha256(diff.encode())
    for name in sorted(untracked):
        digest.update(name.encode() + b"\0")
        digest.update((repo / name).read_bytes())
    return digest.hexdigest()


@lru_cache(maxsize=None)
def code_record(repo: Path = REPO) -> dict[str, Any]:
    """``code_commit`` (full hash), ``code_dirty`` and, when dirty, ``code_diff_sha256`` (:func:`diff_digest`);
    outside a checkout ``code_commit`` is ``None`` and ``code_version`` is the installed package's version.
    Computed once per process: at the start of the first run, before any change a long run might outlive."""
    commit = _git(repo, "rev-parse", "HEAD")
    if commit is None:
        from importlib.metadata import PackageNotFoundError, version
        try:
            installed = version("fedbn-bench")
        except PackageNotFoundError:
            installed = None
        return {"code_commit": None, "code_version": installed}
    digest = diff_digest(repo)
    return {"code_commit": commit.strip(), "code_dirty": digest is not None,
            **({"code_diff_sha256": digest} if digest else {})}


def recorded_code(run_dir: Path) -> Optional[str]:
    """The ``code_commit`` a run directory's ``summary.json`` records (``None``: none, or no readable summary)."""
    try:
        return json.loads((run_dir / "summary.json").read_text()).get("code_commit") or None
    except (OSError, ValueError):
        return None
