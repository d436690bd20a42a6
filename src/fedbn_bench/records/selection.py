"""Model selection over a run's metric rows: the test accuracy at the best validation round, as
FedBN's code reports for Office-Caltech10 and DomainNet (FedBN §5.2, Table 1; repro notes
``M-VAL``): the evaluation with the highest ``val_acc`` wins, the earliest on ties (the code
keeps a round only if it is strictly better)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence


def best_validation(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"best_val_round", "test_acc_at_best_val"}`` of the row with the highest ``val_acc``;
    empty when no row has a ``val_acc`` (the run has no validation split)."""
    best = None
    for row in rows:
        if "val_acc" in row and (best is None or row["val_acc"] > best["val_acc"]):
            best = row
    if best is None:
        return {}
    return {"best_val_round": best["round"], "test_acc_at_best_val": best["test_acc"]}
