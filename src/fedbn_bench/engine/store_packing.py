"""The client records' checkpoint form at scale: index tensors concatenated instead of one tensor
per client (10,000 clients: tens of thousands of tensors to pickle and hash otherwise); the
clients' states checkpoint as their stacks (``client_states.py``). ``unpack_store`` reads
checkpoints of every form written so far (lists, packed stacks, ``ClientStates.state_dict``)."""
from __future__ import annotations

from typing import Any, Optional

import torch

from fedbn_bench.core.updates import State
from fedbn_bench.engine.client_states import is_stacked, unstack_saved

PACKED = "packed"
"""Marker key of a packed list."""
TENSOR_FIELDS = ("indices", "test_indices", "val_indices")


def unpack_states(packed: Any) -> Any:
    """The per-client states of a checkpoint written with ``{PACKED: {key: (n, ...) stack}}`` (rows
    of the stacks: views, one per client); any other form passes through."""
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
    """A checkpoint's ``store`` with per-client lists (``client_local``, ``client_algo_state``,
    ``records``), whichever form it was written in."""
    states = {key: unstack_saved(state[key]) if is_stacked(state[key]) else unpack_states(state[key])
              for key in ("client_local", "client_algo_state") if key in state}
    return {**state, **states, "records": unpack_records(state["records"])}
