"""Model selection over a run's metric rows: the test accuracy at the best validation round, as
FedBN's code reports for Office-Caltech10 and DomainNet (FedBN §5.2, Table 1; repro notes
``M-VAL``): the evaluation with the highest ``val_acc`` wins, the earliest on ties (the code
keeps a round only if it is strictly better)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence


SELECTION_KEYS = ("val_select", "val_acc")
"""The validation score, in order of preference: FedRBN's (RA for AT users, SA for ST users,
``metrics/robust_accuracy.py``) where the run evaluates robustness, else the accuracy."""
REPORTED_AT_BEST = ("test_acc", "robust_acc", "clean_acc")


def selection_key(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The preferred ``SELECTION_KEYS`` entry that some row has; ``None`` without a validation score."""
    return next((k for k in SELECTION_KEYS if any(k in row for row in rows)), None)


def best_validation(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] = REPORTED_AT_BEST) -> dict[str, Any]:
    """``{"best_val_round", "<column>_at_best_val"...}`` of the row with the highest validation
    score (``SELECTION_KEYS``) for the ``columns`` it has (the run loop adds its evaluation attacks'
    ``<label>_acc``: FedRBN Table 3 reports every attack at the best validation round, App. C.1);
    empty when no row has a score (the run has no validation split)."""
    key = selection_key(rows)
    best = None
    for row in rows:
        if key in row and (best is None or row[key] > best[key]):
            best = row
    if best is None:
        return {}
    return {"best_val_round": best["round"], "model_selection": key,
            **{f"{c}_at_best_val": best[c] for c in columns if c in best}}
