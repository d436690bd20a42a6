"""Checkpoints: everything a run needs to continue where it stopped (``resume=<run dir>``).

A checkpoint is one ``checkpoint.pt`` in the run directory, replaced atomically (written to a
temporary file in the same directory, flushed, then renamed over the old one), so a run killed at
any moment leaves either the previous or the new checkpoint, never a torn one. It holds only
tensors, dicts, lists, numbers, strings and ``None``, so it loads with
``torch.load(..., weights_only=True)``. What goes in is assembled by ``Simulation.checkpoint_state``.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterable

import torch

from fedbn_bench.errors import ConfigError

FILENAME = "checkpoint.pt"
FORMAT = 2
"""2: the round pipeline's state (``RoundRunner``, ``ClientStore``) as written since the pipeline
change; checkpoints of format 1 (before it) do not restore into it."""
RESUME_FREE_KEYS = ("resume", "checkpoint_every", "progress", "device", "logger", "engine")
"""Config keys that may differ between a run and its resumption (they do not change its numbers
beyond the engines' float tolerance)."""


def save_checkpoint(run_dir: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` to ``run_dir/checkpoint.pt`` atomically; returns the path."""
    path = Path(run_dir) / FILENAME
    tmp = path.with_name(f".{FILENAME}.tmp")
    with tmp.open("wb") as f:
        torch.save({"format": FORMAT, **state}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def load_checkpoint(run_dir: str | Path, device: torch.device | str = "cpu") -> dict[str, Any]:
    """The checkpoint of ``run_dir`` (``weights_only`` loading, tensors mapped to ``device``)."""
    path = Path(run_dir) / FILENAME
    if not path.is_file():
        raise ConfigError(f"resume={run_dir}: no {FILENAME} there; run with checkpoint_every > 0 to write one")
    state = torch.load(path, map_location=device, weights_only=True)
    found = state.get("format")
    if found != FORMAT:
        raise ConfigError(f"resume={run_dir}: its {FILENAME} has format {found}, this version reads format {FORMAT} "
                          "only (older checkpoints were written before the round pipeline changed and cannot be "
                          "resumed); start the run again without `resume`")
    return state


def plain_attributes(obj: Any) -> dict[str, Any]:
    """The attributes of a strategy object that a checkpoint can hold (its config excluded):
    tensors, numbers, strings, ``None`` and lists/tuples/dicts of them (e.g. an algorithm's server
    momentum, a norm method's stage flag)."""
    return {k: v for k, v in vars(obj).items() if k != "cfg" and _is_plain(v)}


def restore_attributes(obj: Any, state: dict[str, Any]) -> None:
    for key, value in state.items():
        setattr(obj, key, value)


def _is_plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, (str, int)) and _is_plain(v) for k, v in value.items())
    return False


def config_differences(saved: dict[str, Any], current: dict[str, Any], free: Iterable[str] = RESUME_FREE_KEYS) -> list[str]:
    """Dotted keys whose values differ between two resolved configs, except the ``free`` ones."""
    a, b = _flatten(saved), _flatten(current)
    free = tuple(free)
    keys = sorted(k for k in set(a) | set(b) if k.split(".")[0] not in free)
    return [k for k in keys if not _same(a.get(k), b.get(k))]


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    return x == y


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict) and tree:
        out: dict[str, Any] = {}
        for key, value in tree.items():
            out.update(_flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: tree}
