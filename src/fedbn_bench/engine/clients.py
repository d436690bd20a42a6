"""The client store: the server's global state, every client's own state, and the client records.

Per client: the keys its norm method keeps local (``client_local``), its algorithm state
(``client_algo_state``, e.g. DSGD's momentum), both held as stacks (``client_states.py``), and its
record (indices, test/validation indices, domain, role). All of it is checkpointed (``state_dict``/``load_state_dict``).
"""
from __future__ import annotations

from dataclasses import fields
from typing import Any, Optional

import torch
from torch import nn

from fedbn_bench.core.updates import State
from fedbn_bench.engine.client_states import ClientStates, StateMemory
from fedbn_bench.engine.federation import ClientRecord
from fedbn_bench.engine.store_packing import pack_records, unpack_records, unpack_states


class ClientStore:
    """Global state, per-client local and algorithm state, client records."""

    def __init__(self, global_state: State, local_keys: list[str], records: list[ClientRecord],
                 local_from_global: bool = False, memory: Optional[StateMemory] = None) -> None:
        """``local_from_global``: a client holds no local keys until it first trains, and until
        then starts from the global values of those keys (HBN code's hybrid factor);
        ``memory``: where the clients' state stacks live (default: in memory, no limit)."""
        self.global_state = {k: v.detach().clone() for k, v in global_state.items()}
        self.local_keys = list(local_keys)
        self.records = records
        self.memory = memory or StateMemory()
        self.client_local = ClientStates(len(records), self.memory)
        self.client_algo_state = ClientStates(len(records), self.memory)
        if not local_from_global and self.local_keys:
            self.client_local.fill({k: self.global_state[k] for k in self.local_keys})
        self.sizes = torch.tensor([r.size for r in records], device="cpu")

    def __len__(self) -> int:
        return len(self.records)

    def load_client(self, model: nn.Module, client: int, start: State | None = None) -> None:
        """Load ``start`` (default: the global state), then the client's local keys, into ``model``."""
        model.load_state_dict(self.global_state if start is None else start)
        if self.local_keys:
            model.load_state_dict(self.client_local[client], strict=False)

    def keep(self, client: int, local: State, algo_state: dict[str, Any]) -> None:
        """Store what ``client`` keeps after training (copied into its rows of the stacks)."""
        if self.local_keys:
            self.client_local[client] = local
        self.client_algo_state[client] = algo_state

    def client_state_bytes(self) -> int:
        """Bytes the clients' own state holds (local keys and algorithm state, in memory or spilled)."""
        return self.client_local.nbytes() + self.client_algo_state.nbytes()

    def state_dict(self) -> dict[str, Any]:
        """The checkpoint form: the clients' state stacks, the records packed (``store_packing.py``)."""
        return {
            "global_state": self.global_state,
            "client_local": self.client_local.state_dict(),
            "client_algo_state": self.client_algo_state.state_dict(),
            "records": pack_records([{f.name: getattr(r, f.name) for f in fields(r)} for r in self.records]),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Back to a checkpoint's store (this form, or those written before stacks)."""
        self.global_state = state["global_state"]
        self.records = [ClientRecord(**r) for r in unpack_records(state["records"])]
        self.client_local.load(unpack_states(state["client_local"]))
        self.client_algo_state.load(state["client_algo_state"])
