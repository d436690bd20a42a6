"""``python scripts/claims.py``: refresh ``results/claims/declared.json`` from git (when the repository has its
history), then regenerate ``results/CLAIMS.md``, the claim charts (``results/claims/``) and the claims table of
``docs/claims.md`` from the committed run records and that file (``--check`` exits 1 when a committed page
differs from what the records and the committed declared.json give, without writing or reading git; ``--list``
prints the verdicts)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from fedbn_bench.figures.claims import CLAIMS
from fedbn_bench.figures.claims.base import judge
from fedbn_bench.figures.claims.declared import DATA, Declared, is_repository, refresh
from fedbn_bench.figures.claims.evidence import all_runs_read, evidence_of
from fedbn_bench.figures.claims.report import claims_md, readme_table, replace_block, write


def main(argv: list[str] | None = None, repo: Path = Path.cwd()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=repo, help="the repository (results/ and docs/claims.md under it)")
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    parser.add_argument("--list", action="store_true", help="print one line per claim: verdict and id")
    parser.add_argument("--replay", nargs="?", const="all", metavar="CLAIM|PRESET|RUN_DIR",
                        help="replay the committed runs a claim (or a preset's claims, or all current claims) reads, "
                             "or one run directory, at this code, one process a run (fedbn_bench.replay_runner); "
                             "results in results/replay/")
    parser.add_argument("--evals", type=int, default=1, help="--replay: evaluations to compare")
    args = parser.parse_args(argv)
    cache: dict = {}
    verdicts = [judge(claim, args.root, cache) for claim in CLAIMS]
    if args.replay:
        return replay_runs(replay_targets(args.replay, verdicts, args.root), args.evals, args.root)
    if args.list:
        for v in verdicts:
            print(f"{v.verdict:8s} {v.claim.id}")
        return 0
    results, readme = args.root / "results", args.root / "docs" / "claims.md"
    evidence = evidence_of(verdicts, args.root)
    if args.check:
        declared = Declared.load(args.root / DATA)
        stale = [str(p) for p, text in ((results / "CLAIMS.md", claims_md(verdicts, declared, evidence)),
                                        (readme, replace_block(readme.read_text(), readme_table(verdicts))))
                 if not p.exists() or p.read_text() != text]
        for path in stale:
            print(f"stale: {path} (run python scripts/claims.py)", file=sys.stderr)
        return 1 if stale else 0
    declared = Declared.load(args.root / DATA)
    if is_repository(args.root):
        declared = Declared.of(write_record(args.root / DATA, refresh(args.root, CLAIMS)))
        print(f"wrote {args.root / DATA}")
    for path in write(verdicts, results, readme, declared, evidence):
        print(f"wrote {path}")
    return 0


def replay_targets(target: str, verdicts: list, root: Path) -> list[str]:
    """The run directories ``--replay`` names: a claim's, a preset's claims', every current claim's, or one run."""
    if (root / target / "summary.json").is_file():
        return [target.rstrip("/")]
    chosen = [v for v in verdicts if target in ("all", v.claim.id, v.claim.preset)]
    if not chosen:
        raise SystemExit(f"error: --replay {target}: not a claim id, a claim's preset or a run directory under "
                         f"{root}")
    return all_runs_read(chosen)


def replay_runs(runs: list[str], evals: int, root: Path) -> int:
    """Replay each of ``runs`` in a process of its own (threads and RNG as the run recorded); 1 if any failed."""
    failed = 0
    for number, run in enumerate(runs, 1):
        print(f"[{number}/{len(runs)}] {run}", flush=True)
        done = subprocess.run([sys.executable, "-m", "fedbn_bench.replay_runner", run, "--evals", str(evals),
                               "--repo", str(root)], cwd=root)
        failed += done.returncode != 0
    return 1 if failed else 0


def write_record(path: Path, data: dict) -> dict:
    """``data`` written to ``path`` atomically (a temporary file renamed over it); ``data``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return data
