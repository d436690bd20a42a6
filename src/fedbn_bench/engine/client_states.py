"""Every client's own state as one stack per tensor, memory-mapped when it would not fit (issue 58).

A cross-device federation keeps state on thousands of clients (FedBN's local BN layers, SCAFFOLD's
control variates, DSGD's momenta). Held as one dict of tensors per client, 10,000 clients are
hundreds of thousands of small tensors (and a client's row of a round's stack pins the whole
stack). ``ClientStates`` holds, for each leaf of the clients' state trees (a path such as
``("control", "conv1.weight")``), one ``(num_clients, *shape)`` tensor, allocated when a client
first stores that leaf; a client reads its rows as views and stores by copying into them, so the
values are those stored, bit for bit.

Past a memory limit (``StateMemory``, shared by the store's local and algorithm states), a new
leaf's stack is a memory-mapped file (``numpy.lib.format.open_memmap``, removed with the store)
instead of memory, and the run says so (the log, ``client_state_spilled_mb`` in the summary).
Reading a spilled leaf gives the row on the device its value was stored from.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np
import torch

from fedbn_bench.errors import ConfigError

log = logging.getLogger(__name__)

Path_ = tuple[str, ...]


def flatten(tree: dict[str, Any], prefix: Path_ = ()) -> dict[Path_, torch.Tensor]:
    """The tensor leaves of a nested dict by path."""
    leaves: dict[Path_, torch.Tensor] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            leaves.update(flatten(value, (*prefix, key)))
        elif isinstance(value, torch.Tensor):
            leaves[(*prefix, key)] = value
        else:
            raise TypeError(f"client state {'/'.join((*prefix, key))!r} is a {type(value).__name__}, not a tensor")
    return leaves


def unflatten(leaves: dict[Path_, torch.Tensor]) -> dict[str, Any]:
    """The nested dict of ``flatten``'s leaves."""
    tree: dict[str, Any] = {}
    for path, value in leaves.items():
        node = tree
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return tree


def memory_limit_bytes(setting: Any) -> Optional[float]:
    """``engine.client_state_memory_mb``: ``auto`` (a quarter of this machine's memory), ``none``
    (no limit) or a number of MB (0: every stack on disk)."""
    if setting is None or str(setting).lower() == "none":
        return None
    if str(setting).lower() == "auto":
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 4
    try:
        megabytes = float(setting)
    except ValueError:
        megabytes = -1.0
    if megabytes < 0:
        raise ConfigError(f"engine.client_state_memory_mb={setting!r} is invalid: allowed: auto, none or a number "
                          "of MB >= 0 (the clients' state past it is memory-mapped from disk)")
    return megabytes * 2**20


SPILL_PREFIX = "client_state_"


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return torch.empty((), dtype=dtype, device="cpu").numpy().dtype


def zeros(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A zero stack whose untouched rows cost no memory on the CPU (``numpy.zeros`` maps zero pages
    lazily, ``torch.zeros`` writes every page): SCAFFOLD's controls of 1,000 clients of which a
    few dozen have trained hold a few dozen rows' pages."""
    if device.type != "cpu" or dtype == torch.bfloat16:
        return torch.zeros(shape, dtype=dtype, device=device)
    return torch.from_numpy(np.zeros(shape, dtype=numpy_dtype(dtype)))


class StateMemory:
    """The memory budget that several ``ClientStates`` share: stacks past ``limit_bytes`` in all
    go to memory-mapped files in a directory made under ``spill_parent`` (removed with this object)."""

    def __init__(self, limit_bytes: Optional[float] = None, spill_parent: Optional[str | Path] = None) -> None:
        self.limit_bytes = limit_bytes
        self.spill_parent = spill_parent
        self.spill_dir: Optional[Path] = None
        self.used = 0
        self.spilled = 0
        self.files = 0

    def allocate(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A zero stack: in memory on ``device``, or (past the limit) a memory-mapped file."""
        size = dtype.itemsize * int(np.prod(shape))
        self.used += size
        if self.limit_bytes is None or self.used <= self.limit_bytes:
            return zeros(shape, dtype, device)
        if self.spill_dir is None:
            if self.spill_parent is not None:  # files a killed run left in its directory, now this run's
                for stale in Path(self.spill_parent).glob(f"{SPILL_PREFIX}*"):
                    shutil.rmtree(stale, ignore_errors=True)
            self.spill_dir = Path(tempfile.mkdtemp(prefix=SPILL_PREFIX, dir=self.spill_parent))
            weakref.finalize(self, shutil.rmtree, self.spill_dir, True)
            log.warning("client state above %.4g MB: further stacks are memory-mapped files in %s",
                        self.limit_bytes / 2**20, self.spill_dir)
        self.spilled += size
        self.files += 1
        array = np.lib.format.open_memmap(self.spill_dir / f"{self.files}.npy", mode="w+", dtype=numpy_dtype(dtype),
                                          shape=shape)
        return torch.from_numpy(array)

    def describe(self) -> dict[str, float]:
        """``client_state_mb`` and, when some of it is on disk, ``client_state_spilled_mb``."""
        return {"client_state_mb": self.used / 2**20,
                **({"client_state_spilled_mb": self.spilled / 2**20} if self.spilled else {})}


class ClientStates:
    """``states[c]``: client ``c``'s state tree (row views; ``{}`` before it stores one);
    ``states[c] = tree`` copies ``tree`` into its rows."""

    def __init__(self, num_clients: int, memory: Optional[StateMemory] = None) -> None:
        self.num_clients = num_clients
        self.memory = memory or StateMemory()
        self.stacks: dict[Path_, torch.Tensor] = {}
        self.devices: dict[Path_, torch.device] = {}
        self.paths: list[Optional[tuple[Path_, ...]]] = [None] * num_clients
        self._signatures: dict[tuple[Path_, ...], tuple[Path_, ...]] = {}

    def __len__(self) -> int:
        return self.num_clients

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self[c] for c in range(self.num_clients))

    def __getitem__(self, client: int) -> dict[str, Any]:
        paths = self.paths[client]
        if not paths:
            return {}
        return unflatten({p: self.row(p, client) for p in paths})

    def __setitem__(self, client: int, tree: dict[str, Any]) -> None:
        leaves = flatten(tree)
        for path, value in leaves.items():
            self.stack_for(path, value)[client].copy_(value.detach())
        self.paths[client] = self._signature(tuple(leaves))

    def fill(self, tree: dict[str, Any]) -> None:
        """Every client's state set to ``tree`` (one copy per leaf)."""
        leaves = flatten(tree)
        for path, value in leaves.items():
            self.stack_for(path, value).copy_(value.detach().expand(self.num_clients, *value.shape))
        self.paths = [self._signature(tuple(leaves))] * self.num_clients

    def row(self, path: Path_, client: int) -> torch.Tensor:
        value = self.stacks[path][client]
        return value if value.device == self.devices[path] else value.to(self.devices[path])

    def stack_for(self, path: Path_, value: torch.Tensor) -> torch.Tensor:
        """The leaf's stack, allocated at its first value (``StateMemory`` decides where)."""
        stack = self.stacks.get(path)
        if stack is not None:
            if stack.shape[1:] != value.shape or stack.dtype != value.dtype:
                raise ValueError(f"client state {'/'.join(path)!r}: {tuple(value.shape)} {value.dtype} "
                                 f"where other clients hold {tuple(stack.shape[1:])} {stack.dtype}")
            return stack
        stack = self.memory.allocate((self.num_clients, *value.shape), value.dtype, value.device)
        self.stacks[path], self.devices[path] = stack, value.device
        return stack

    def nbytes(self) -> int:
        """Bytes of all stacks, in memory and spilled."""
        return sum(s.element_size() * s.numel() for s in self.stacks.values())

    def clone(self) -> "ClientStates":
        """An in-memory copy (e.g. the state kept at the best validation round)."""
        copy = ClientStates(self.num_clients)
        copy.stacks = {p: s.to(self.devices[p], copy=True) for p, s in self.stacks.items()}
        copy.devices = dict(self.devices)
        copy.paths = list(self.paths)
        copy._signatures = dict(self._signatures)
        return copy

    def state_dict(self) -> dict[str, Any]:
        """The checkpoint form: the rows of the clients that hold a state (a federation of 10,000
        clients of which a few hundred have trained writes those few hundred) and which leaves each holds."""
        signatures = list(dict.fromkeys(p for p in self.paths if p is not None))
        index = {s: i for i, s in enumerate(signatures)}
        held = torch.tensor([-1 if p is None else index[p] for p in self.paths], dtype=torch.long, device="cpu")
        rows = torch.nonzero(held >= 0).flatten()
        return {"stacks": {"/".join(p): s[rows.to(s.device)] for p, s in self.stacks.items()},
                "signatures": [["/".join(p) for p in s] for s in signatures], "held": held}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> "ClientStates":
        """An in-memory store holding ``state_dict``'s form (e.g. a checkpoint's kept best-validation state)."""
        states = cls(len(state["held"]))
        states.load_state_dict(state)
        return states

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Back to the checkpointed values (into this object's stacks, spilled or not)."""
        signatures = [tuple(tuple(p.split("/")) for p in s) for s in state["signatures"]]
        held = torch.as_tensor(state["held"], dtype=torch.long, device="cpu")
        self.resize(len(held))
        rows = torch.nonzero(held >= 0).flatten()
        for key, value in state["stacks"].items():
            path = tuple(key.split("/"))
            device = self.devices.get(path, value.device)
            stack = self.stack_for(path, torch.empty(value.shape[1:], dtype=value.dtype, device=device))
            stack[rows.to(stack.device)] = value.to(stack.device)
        self.paths = [None if i < 0 else self._signature(signatures[i]) for i in held.tolist()]

    def load(self, saved: Any) -> None:
        """Back to a checkpoint's client states in any form written so far: ``state_dict``'s, or a
        list of per-client trees (checkpoints written before stacks)."""
        if is_stacked(saved):
            self.load_state_dict(saved)
            return
        self.resize(len(saved))
        for client, tree in enumerate(saved):
            if tree:
                self[client] = tree

    def resize(self, num_clients: int) -> None:
        """A store of ``num_clients`` clients (stacks of another size given back, empty)."""
        if num_clients == self.num_clients:
            return
        self.memory.used -= self.nbytes()
        self.num_clients, self.stacks, self.devices = num_clients, {}, {}
        self.paths = [None] * num_clients

    def _signature(self, paths: tuple[Path_, ...]) -> tuple[Path_, ...]:
        return self._signatures.setdefault(paths, paths)


def is_stacked(saved: Any) -> bool:
    """Whether a checkpoint's client states are ``ClientStates.state_dict``'s form."""
    return isinstance(saved, dict) and "signatures" in saved


def unstack_saved(saved: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-client trees of ``ClientStates.state_dict``'s form (for scripts that read checkpoints)."""
    return list(ClientStates.from_state_dict(saved))
