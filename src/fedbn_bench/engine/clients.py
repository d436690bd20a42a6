"""The client store: the server's global state, every client's own state, and the client records.

Per client: the keys its norm method keeps local (``client_local``), its algorithm state
(``client_algo_state``, e.g. DSGD's momentum) and its record (indices, test/validation indices,
domain, role). All of it is checkpointed (``state_dict``/``load_state_dict``).
"""
from __future__ import annotations

from dataclasses import fields
from typing import Any

import torch
from torch import nn

from fedbn_bench.core.updates import State
from fedbn_bench.engine.federation import ClientRecord
from fedbn_bench.engine.store_packing import pack_records, pack_states, unpack_store


class ClientStore:
    """Global state, per-client local and algorithm state, client records."""

    def __init__(self, global_state: State, local_keys: list[str], records: list[ClientRecord],
                 local_from_global: bool = False) -> None:
        """``local_from_global``: a client holds no local keys until it first trains, and until
        then starts from the global values of those keys (HBN code's hybrid factor)."""
        self.global_state = {k: v.detach().clone() for k, v in global_state.items()}
        self.local_keys = list(local_keys)
        self.records = records
        initial = [] if local_from_global else self.local_keys
        rows = {k: self.global_state[k].expand(len(records), *self.global_state[k].shape).clone().unbind(0)
                for k in initial}  # one stack per key, each client's values a row of it: O(keys) copies
        self.client_local: list[State] = [{k: rows[k][c] for k in initial} for c in range(len(records))]
        self.client_algo_state: list[dict[str, Any]] = [{} for _ in records]
        self.sizes = torch.tensor([r.size for r in records], device="cpu")

    def __len__(self) -> int:
        return len(self.records)

    def load_client(self, model: nn.Module, client: int, start: State | None = None) -> None:
        """Load ``start`` (default: the global state), then the client's local keys, into ``model``."""
        model.load_state_dict(self.global_state if start is None else start)
        if self.local_keys:
            model.load_state_dict(self.client_local[client], strict=False)

    def keep(self, client: int, local: State, algo_state: dict[str, Any]) -> None:
        """Store what ``client`` keeps after training."""
        if self.local_keys:
            self.client_local[client] = local
        self.client_algo_state[client] = algo_state

    def client_state_bytes(self) -> int:
        """Bytes the clients' own state holds (local keys and algorithm state; a storage shared by
        several clients' tensors counted once)."""
        seen, total = set(), 0
        pending: list[Any] = [*self.client_local, *self.client_algo_state]
        while pending:
            value = pending.pop()
            if isinstance(value, dict):
                pending.extend(value.values())
            elif isinstance(value, (list, tuple)):
                pending.extend(value)
            elif isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() not in seen:
                seen.add(value.untyped_storage().data_ptr())
                total += value.untyped_storage().nbytes()
        return total

    def state_dict(self) -> dict[str, Any]:
        """The checkpoint form: local states and records packed (``store_packing.py``)."""
        return {
            "global_state": self.global_state,
            "client_local": pack_states(self.client_local),
            "client_algo_state": self.client_algo_state,
            "records": pack_records([{f.name: getattr(r, f.name) for f in fields(r)} for r in self.records]),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = unpack_store(state)
        self.global_state = state["global_state"]
        self.client_local = state["client_local"]
        self.client_algo_state = state["client_algo_state"]
        self.records = [ClientRecord(**r) for r in state["records"]]
