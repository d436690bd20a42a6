"""``python scripts/claims.py``: regenerate ``results/CLAIMS.md``, the claim charts (``results/claims/``)
and the claims table of ``docs/claims.md`` from the committed run records (``--check`` exits 1 when a
committed file differs from what the records give, without writing; ``--list`` prints the verdicts)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fedbn_bench.figures.claims import CLAIMS
from fedbn_bench.figures.claims.base import judge
from fedbn_bench.figures.claims.report import claims_md, readme_table, replace_block, write


def main(argv: list[str] | None = None, repo: Path = Path.cwd()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=repo, help="the repository (results/ and docs/claims.md under it)")
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    parser.add_argument("--list", action="store_true", help="print one line per claim: verdict and id")
    args = parser.parse_args(argv)
    cache: dict = {}
    verdicts = [judge(claim, args.root, cache) for claim in CLAIMS]
    if args.list:
        for v in verdicts:
            print(f"{v.verdict:8s} {v.claim.id}")
        return 0
    results, readme = args.root / "results", args.root / "docs" / "claims.md"
    if args.check:
        stale = [str(p) for p, text in ((results / "CLAIMS.md", claims_md(verdicts)),
                                        (readme, replace_block(readme.read_text(), readme_table(verdicts))))
                 if not p.exists() or p.read_text() != text]
        for path in stale:
            print(f"stale: {path} (run python scripts/claims.py)", file=sys.stderr)
        return 1 if stale else 0
    for path in write(verdicts, results, readme):
        print(f"wrote {path}")
    return 0
