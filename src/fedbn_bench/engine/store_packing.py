"""The client store's checkpoint form at scale: per-client states and records as a few stacked or
concatenated tensors instead of one tensor per client and key (10,000 clients: hundreds of
thousands of tensors to pickle and hash otherwise). ``unpack_store`` gives back the per-client
lists; a checkpoint written before (lists) passes through unchanged."""
from __future__ import annotations

from typing import Any, Optional

import torch

from fedbn_bench.core.updates import State

PACKED = "packed"
"""Marker key of a packed list."""
TENSOR_FIELDS = ("indices", "test_indices", "val_indices")


def pack_states(states: list[State]) -> Any:
    """``{PACKED: {key: (n, ...) stack}}`` when every client holds the same keys with equal
    shapes and dtypes, else ``states`` itself."""
    if not states or any(s.keys() != states[0].keys() for s in states):
        return states
    first = states[0]
    if any(s[k].shape != first[k].shape or s[k].dtype != first[k].dtype for s in states for k in first):
        return states
    return {PACKED: {k: torch.stack([s[k] for s in states]) for k in first}, "n": len(states)}


def unpack_states(packed: Any) -> list[State]:
    """The per-client states of ``pack_states`` (rows of the stacks: views, one per client)."""
    if not isinstance(packed, dict) or PACKED not in packed:
        return packed
    stacks = packed[PACKED]
    rows = {k: v.unbind(0) for k, v in stacks.items()}
    return [{k: rows[k][c] for k in stacks} for c in range(packed["n"])]


def pack_records(records: list[dict[str, Any]]) -> Any:
    """The records' index tensors concatenated with their lengths (a field that is ``None`` for
    every client stays ``None``), the other fields as lists; ``records`` itself when a field is
    ``None`` for some clients only."""
    out: dict[str, Any] = {PACKED: True, "n": len(records)}
    for name in records[0] if records else ():
        values = [r[name] for r in records]
        if name in TENSOR_FIELDS:
            if all(v is None for v in values):
                out[name] = None
            elif any(v is None for v in values):
                return records
            else:
                out[name] = (torch.cat(values), torch.tensor([len(v) for v in values], device="cpu"))
        else:
            out[name] = values
    return out if records else records


def unpack_records(packed: Any) -> list[dict[str, Any]]:
    """The per-client record dicts of ``pack_records``."""
    if not isinstance(packed, dict) or PACKED not in packed:
        return packed
    n = packed["n"]
    columns: dict[str, list[Optional[Any]]] = {}
    for name, value in packed.items():
        if name in (PACKED, "n"):
            continue
        if name in TENSOR_FIELDS:
            columns[name] = [None] * n if value is None else list(torch.split(value[0], value[1].tolist()))
        else:
            columns[name] = value
    return [{name: column[c] for name, column in columns.items()} for c in range(n)]


def unpack_store(state: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's ``store`` with per-client lists (``client_local``, ``records``), packed or not."""
    return {**state, "client_local": unpack_states(state["client_local"]), "records": unpack_records(state["records"])}
