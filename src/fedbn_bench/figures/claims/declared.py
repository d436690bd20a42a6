"""When each check and control of the claims was declared, and when each run they read was committed, from git
(issue 49 §1: pre-registration checked by the machine).

A declaration is identified by what it compares, not by its wording: a check by its claim, relation, threshold
and its two quantities' run tree, selection, metric and scale (or the number it compares with); a control by its
claim, the quantities it puts in place and the checks it is read against (:func:`claim_keys`). Its commit is the
first commit whose claims declare it: every commit that changed ``src/fedbn_bench/figures/claims/`` (branches
included) is exported and its ``CLAIMS`` imported afresh, all in one subprocess that runs this file
(:func:`keys_at`, :func:`tree_keys`); a commit whose claims do not import is skipped. A run's commit is the first
that added its ``summary.json``, followed through renames (:func:`run_commits`). Commits are placed by their
position in git's topological order of the history (every commit after its parents), so "declared before its
runs" is a comparison of positions; a declaration or run not yet committed has none (it comes after everything
committed).

The result is committed as ``results/claims/declared.json`` (:data:`DATA`): ``python scripts/claims.py``
refreshes it from git and the page reads only the file, so the page regenerates byte for byte without history.
This module imports nothing of the project at its top, so that it runs over any commit's ``src/``.
"""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

DATA = Path("results/claims/declared.json")
"""The committed record, relative to the repository."""
CLAIMS_SRC = "src/fedbn_bench/figures/claims"
CACHE = Path(".claims_declared")
"""Each commit's declaration keys once read (gitignored)."""
BEFORE, WITH, AFTER, UNRECORDED = "before its runs", "with its runs", "after its runs", "not recorded"
"""How a declaration stands to the runs it reads (:meth:`Declared.standing`)."""


def quantity_key(q: Any) -> str:
    where = json.dumps({str(k): v for k, v in dict(q.where).items()}, sort_keys=True, default=str)
    return f"{q.runs} {where} {getattr(q, 'metric', 'summary:final_test_acc')} x{getattr(q, 'scale', 100.0):g}"


def operand_key(quantities: Mapping[str, Any], name: Any) -> str:
    return quantity_key(quantities[name]) if isinstance(name, str) else f"{name:g}"


def check_key(claim_id: str, quantities: Mapping[str, Any], check: Any) -> str:
    """A check as what it compares: claim, relation, threshold, both operands."""
    return (f"{claim_id} | check {check.relation} {check.threshold:g} | {operand_key(quantities, check.a)} | "
            f"{operand_key(quantities, check.b)}")


def control_checks(claim: Any, control: Any) -> list[int]:
    """The indices of the checks ``control`` is read against (``Claim.control_checks``, for any commit's claims)."""
    chosen = getattr(control, "checks", None)
    if chosen is not None:
        return [i for i in chosen if 0 <= i < len(claim.checks)]
    return [i for i, c in enumerate(claim.checks) if {c.a, c.b} & set(control.replace)]


def control_key(claim: Any, control: Any) -> str:
    """A control as what it puts in place and the checks it is read against."""
    swapped = {**claim.quantities, **control.replace}
    replaced = "; ".join(f"{name}={quantity_key(q)}" for name, q in sorted(control.replace.items()))
    checks = "; ".join(check_key(claim.id, swapped, claim.checks[i]) for i in control_checks(claim, control))
    return f"{claim.id} | control {replaced} | {checks}"


def claim_keys(claim: Any) -> list[str]:
    """The keys of a claim's checks and controls, and of those of the declarations it superseded."""
    keys = [check_key(claim.id, claim.quantities, c) for c in claim.checks]
    keys += [control_key(claim, c) for c in getattr(claim, "controls", ())]
    for old in getattr(claim, "superseded", ()):
        keys += claim_keys(old.claim)
    return keys


def all_keys(claims: Iterable[Any]) -> list[str]:
    return sorted({k for claim in claims for k in claim_keys(claim)})


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def keys_at(repo: Path, commits: Iterable[str]) -> dict[str, Optional[set[str]]]:
    """Each commit → the declaration keys of its claims (``None`` where they do not import), kept under
    :data:`CACHE` (a commit's claims never change). The commits not cached are exported and imported in one
    subprocess running this file, which imports each tree's claims afresh (:func:`tree_keys`)."""
    cache = repo / CACHE
    keys: dict[str, Optional[list[str]]] = {}
    missing = []
    for commit in commits:
        cached = cache / f"{commit}.json"
        if cached.exists():
            keys[commit] = json.loads(cached.read_text())
        else:
            missing.append(commit)
    if missing:
        with tempfile.TemporaryDirectory() as tmp:
            trees = [Path(tmp) / commit for commit in missing]
            for commit, tree in zip(missing, trees):
                tree.mkdir()
                archive = subprocess.run(["git", "-C", str(repo), "archive", commit, "src"], check=True,
                                         capture_output=True)
                subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
            out = Path(tmp) / "keys.json"
            done = subprocess.run([sys.executable, __file__, str(out), *(str(t / "src") for t in trees)],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"importing the claims of {len(missing)} commits failed: {done.stderr[-2000:]}")
            found = json.loads(out.read_text())
        cache.mkdir(parents=True, exist_ok=True)
        for commit, tree in zip(missing, trees):
            keys[commit] = found[str(tree / "src")]
            (cache / f"{commit}.json").write_text(json.dumps(keys[commit]))
    return {c: None if k is None else set(k) for c, k in keys.items()}


def tree_keys(sources: Iterable[str]) -> dict[str, Optional[list[str]]]:
    """Each exported ``src/`` → the declaration keys of its ``CLAIMS`` (``None`` where they do not import), each
    tree imported afresh in this process: the project's modules of the tree before are dropped first."""
    found: dict[str, Optional[list[str]]] = {}
    for source in sources:
        for name in [m for m in sys.modules if m == "fedbn_bench" or m.startswith("fedbn_bench.")]:
            del sys.modules[name]
        sys.path[0] = source
        importlib.invalidate_caches()
        try:
            found[source] = all_keys(importlib.import_module("fedbn_bench.figures.claims").CLAIMS)
        except Exception:  # a commit whose claims do not import is skipped
            found[source] = None
    return found


HISTORY = ("--topo-order", "--reverse", "--full-history")
"""Every commit of the history, each after its parents."""


def positions(repo: Path) -> dict[str, int]:
    """Each commit (full hash) → its position in :data:`HISTORY` (1 for the root)."""
    return {c: i + 1 for i, c in enumerate(git(repo, "rev-list", *HISTORY, "HEAD").split())}


def declaration_commits(repo: Path, current: Iterable[str]) -> dict[str, Optional[str]]:
    """Each key of ``current`` (the working tree's) → the first commit that declared it (``None``: not committed)."""
    first: dict[str, str] = {}
    commits = git(repo, "log", *HISTORY, "--format=%H", "--", CLAIMS_SRC).split()
    declared = keys_at(repo, commits)
    for commit in commits:
        for key in declared[commit] or ():
            first.setdefault(key, commit)
    return {k: first.get(k) for k in current}


def run_commits(repo: Path, trees: Iterable[str], place: Mapping[str, int]) -> dict[str, str]:
    """Each run directory under ``trees`` → the commit that first added its ``summary.json``; for a run whose summary
    records the code that made it (``code_commit``: a run made, or re-run in full, since issue 57), the last commit
    that wrote that summary, so that a run re-run over an older one is dated by its own record."""
    from fedbn_bench.records.provenance import recorded_code   # here: the module's top imports nothing of the project
    origin: dict[str, str] = {}
    latest: dict[str, str] = {}
    commit = ""
    log = git(repo, "log", *HISTORY, "-M", "--name-status", "--format=C %H", "--", "results")
    for line in log.splitlines():
        parts = line.split("\t")
        if line.startswith("C "):
            commit = line[2:]
        elif parts[0] in ("A", "M") and parts[1].endswith("/summary.json"):
            run = parts[1].rsplit("/", 1)[0]
            latest[run] = commit
            if parts[0] == "A":
                origin.setdefault(run, commit)
        elif parts[0].startswith("R") and parts[2].endswith("/summary.json"):
            old, new = parts[1].rsplit("/", 1)[0], parts[2].rsplit("/", 1)[0]
            origin[new] = origin.pop(old, commit)
            latest[new] = commit
    prefixes = tuple(t.rstrip("/") + "/" for t in trees)
    dated = {run: latest[run] if recorded_code(repo / run) else c for run, c in origin.items()}
    return {run: c for run, c in dated.items() if run.startswith(prefixes) and c in place}


def trees(claims: Iterable[Any]) -> set[str]:
    """The run trees the claims read (their controls' and superseded declarations' included)."""
    out: set[str] = set()
    for claim in claims:
        out |= {q.runs for q in claim.quantities.values()}
        out |= {q.runs for control in claim.controls for q in control.replace.values()}
        out |= trees(s.claim for s in claim.superseded)
    return out


def uncommitted_runs(repo: Path, trees: Iterable[str]) -> list[str]:
    """The run directories under ``trees`` whose ``summary.json`` is in the working tree but not yet committed
    (a harvest about to be committed with the record: recorded as not committed, dated by the next refresh)."""
    paths = [t for t in trees if (repo / t).exists()]
    if not paths:
        return []
    listed = git(repo, "ls-files", "--others", "--exclude-standard", "--", *paths)
    listed += git(repo, "diff", "--name-only", "--diff-filter=A", "--cached", "--", *paths)
    return sorted({p.rsplit("/", 1)[0] for p in listed.splitlines() if p.endswith("/summary.json")})


def is_repository(repo: Path) -> bool:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True).returncode == 0


def refresh(repo: Path, claims: Iterable[Any]) -> dict:
    """The record of ``claims`` (the working tree's) and of the runs they read, from ``repo``'s git."""
    place = positions(repo)
    claims = list(claims)

    def stamp(commit: Optional[str]) -> Optional[list]:
        return None if commit is None else [commit[:7], place[commit]]

    read = trees(claims)
    runs = {run: stamp(c) for run, c in run_commits(repo, read, place).items()}
    for run in uncommitted_runs(repo, read):
        runs.setdefault(run, None)
    return {"declarations": {k: stamp(c) for k, c in declaration_commits(repo, all_keys(claims)).items()},
            "runs": dict(sorted(runs.items()))}


@dataclass(frozen=True)
class Declared:
    """The committed record (:data:`DATA`): declaration key → ``[commit, position]`` (``None``: not committed),
    run directory → the same."""

    declarations: Mapping[str, Optional[list]]
    runs: Mapping[str, Optional[list]]

    @classmethod
    def load(cls, path: Path) -> "Declared":
        """The record at ``path`` (empty where there is none: every declaration reads *not recorded*)."""
        return cls.of(json.loads(path.read_text())) if path.exists() else cls({}, {})

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> "Declared":
        return cls(data["declarations"], data["runs"])

    def standing(self, key: str, runs: Iterable[str]) -> tuple[str, Optional[str], Optional[str]]:
        """``(standing, declaring commit, first run's commit)`` of the declaration ``key`` against ``runs``."""
        if key not in self.declarations:
            return UNRECORDED, None, None
        declared = self.declarations[key]
        stamps = [self.runs.get(r) for r in runs]
        committed = [s for s in stamps if s is not None]
        first = min(committed, key=lambda s: s[1]) if committed else None
        commit = declared[0] if declared else None
        if declared is None:
            return (AFTER if committed else WITH if stamps else BEFORE), commit, first and first[0]
        if first is not None and first[1] < declared[1]:
            return AFTER, commit, first[0]
        return (WITH if first is not None and first[1] == declared[1] else BEFORE), commit, first and first[0]


if __name__ == "__main__":   # python declared.py OUT SRC...: the keys of each exported src/ as JSON in OUT
    Path(sys.argv[1]).write_text(json.dumps(tree_keys(sys.argv[2:])))
