"""Whether a claim's runs still come from this code (issue 57 §1): the runs its current declaration reads, and what
their replays found (``records/replay.py``).

A run's evidence status is its replay's (reproduced, drifted, not comparable) at the commit that replayed it; a run
that records the commit that made it (``code_commit`` in ``summary.json``) and has no replay is *made at* that
commit; any other is *not replayed*. A claim that reads a drifted run reads **evidence stale** until that run is
re-run in full at the new code (its replay then gives way to the run's own record). A superseded declaration's
runs get the same statuses in its own section, but count nowhere else: the queue neither replays nor re-runs them.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Optional

from fedbn_bench.figures.claims.base import Verdict
from fedbn_bench.records.provenance import recorded_code
from fedbn_bench.records.replay import DRIFTED, NOT_COMPARABLE, REPRODUCED, Replay, load_replays

MADE_AT, NOT_REPLAYED = "made at", "not replayed"
ORDER = (REPRODUCED, MADE_AT, DRIFTED, NOT_COMPARABLE, NOT_REPLAYED)
"""The evidence statuses, in the page's order."""
STALE = "evidence stale"


def runs_read(verdict: Verdict) -> list[str]:
    """The run directories a claim's current declaration counts (its quantities' and controls'), sorted."""
    runs = {r for m in verdict.measured.values() for r in m.runs}
    runs |= {r for measured in verdict.control_measured for m in measured.values() for r in m.runs}
    return sorted(runs)


@dataclass(frozen=True)
class RunEvidence:
    run: str
    status: str
    """reproduced, drifted, not comparable, made at, not replayed."""
    commit: Optional[str]
    """The commit that replayed it, or that made it (short)."""
    detail: str = ""


def run_evidence(run: str, replay: Optional[Replay], made_at: Optional[str]) -> RunEvidence:
    """The evidence status of ``run`` (module docstring); ``made_at``: the ``code_commit`` its summary records.
    A replay of another record than the run's present one (the run was re-run since) is ignored."""
    if replay is not None and replay.run_code == made_at:
        return RunEvidence(run, replay.status, (replay.code_commit or "")[:7] or None, replay.detail)
    if made_at is not None:
        return RunEvidence(run, MADE_AT, made_at[:7])
    return RunEvidence(run, NOT_REPLAYED, None)


@dataclass(frozen=True)
class ClaimEvidence:
    runs: tuple[RunEvidence, ...]
    superseded: tuple["ClaimEvidence", ...] = ()
    """The same for each declaration the claim superseded, in ``Verdict.superseded`` order."""

    @property
    def stale(self) -> bool:
        return any(r.status == DRIFTED for r in self.runs)

    def text(self) -> str:
        """One line: how many of the claim's runs reproduce, at which commits, and what else."""
        if not self.runs:
            return "no runs"
        counts = Counter((r.status, r.commit) for r in self.runs)
        parts = [f"{n} {status}" + (f"{'' if status == MADE_AT else ' at'} {commit}" if commit else "")
                 for status in ORDER for (s, commit), n in sorted(counts.items(), key=str) if s == status]
        return f"{len(self.runs)} runs: " + ", ".join(parts) + (f" — **{STALE}**" if self.stale else "")


def claim_evidence(verdict: Verdict, replays: Mapping[str, Replay], made_at: Mapping[str, str]) -> ClaimEvidence:
    return ClaimEvidence(tuple(run_evidence(r, replays.get(r), made_at.get(r)) for r in runs_read(verdict)),
                         tuple(claim_evidence(old, replays, made_at) for old in verdict.superseded))


def all_runs_read(verdicts: Iterable[Verdict]) -> list[str]:
    return sorted({r for v in verdicts for r in runs_read(v)})


def recorded_commits(root: Path, runs: Iterable[str]) -> dict[str, str]:
    """Each run's ``code_commit`` as its ``summary.json`` records it (runs that record none are left out)."""
    return {run: commit for run in runs if (commit := recorded_code(root / run))}


def evidence_summary(claims: Iterable[ClaimEvidence]) -> str:
    """The page's one line on its evidence: the runs its current claims read (not superseded ones), by status."""
    runs = {r.run: r for c in claims for r in c.runs}
    counts = Counter(r.status for r in runs.values())
    return (f"Of the {len(runs)} runs the current claims read: " + ", ".join(f"{counts[s]} {s}" for s in ORDER)
            + ".")


def evidence_of(verdicts: Iterable[Verdict], root: Path) -> dict[str, ClaimEvidence]:
    """Each claim's evidence (by id) from the replays and run records under ``root``."""
    verdicts = list(verdicts)
    runs = all_runs_read([*verdicts, *(old for v in verdicts for old in v.superseded)])
    replays, made_at = load_replays(root, runs), recorded_commits(root, runs)
    return {v.claim.id: claim_evidence(v, replays, made_at) for v in verdicts}
