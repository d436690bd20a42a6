"""Paper claims as data, checked against committed run records (``base.py``: the model; one module per
paper: its claims; ``report.py``: ``results/CLAIMS.md`` and the README's table)."""
from __future__ import annotations

from fedbn_bench.figures.claims import fbn, fedbn, fedrbn, fixbn, hbn
from fedbn_bench.figures.claims.base import Claim

CLAIMS: list[Claim] = [*fbn.CLAIMS, *fixbn.CLAIMS, *hbn.CLAIMS, *fedrbn.CLAIMS, *fedbn.CLAIMS]
"""Every declared claim, in report order."""

BY_ID: dict[str, Claim] = {c.id: c for c in CLAIMS}
