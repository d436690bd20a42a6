"""Checkpoints: everything a run needs to continue where it stopped (``resume=<run dir>``).

A checkpoint is one ``checkpoint.pt`` in the run directory, replaced atomically
(``records/atomic.py``), so a run killed at any moment leaves either the previous or the new
checkpoint, never a torn one. It holds only tensors, dicts, lists, numbers, strings and ``None``,
so it loads with ``torch.load(..., weights_only=True)``, and a SHA-256 checksum of that content
(``content_digest``), checked on loading: a flipped bit, a truncated or overwritten file is one
error, never a resumed run on corrupted state. What goes in is assembled by
``Simulation.checkpoint_state`` (with the data's fingerprint, ``content_digest`` of its tensors).
"""
from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any, Iterable

import torch

from fedbn_bench.errors import ConfigError
from fedbn_bench.records.atomic import atomic_write
from fedbn_bench.stopping import signals_deferred

FILENAME = "checkpoint.pt"
FORMAT = 3
"""3: format 2 (the round pipeline's state, ``RoundRunner`` and ``ClientStore``) with a checksum and
the data's fingerprint; older checkpoints are not resumed."""
RESUME_FREE_KEYS = ("resume", "overwrite", "record", "checkpoint_every", "progress", "device", "logger", "engine")
"""Config keys that may differ between a run and its resumption (they do not change its numbers
beyond the engines' float tolerance)."""


def save_checkpoint(run_dir: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` with its checksum to ``run_dir/checkpoint.pt`` atomically; returns the path. Ctrl-C or
    SIGTERM during the write acts once it is done (``stopping.signals_deferred``)."""
    content = {"format": FORMAT, **state}
    with signals_deferred():
        return atomic_write(Path(run_dir) / FILENAME,
                            lambda f: torch.save({**content, "sha256": content_digest(content)}, f))


def load_checkpoint(run_dir: str | Path, device: torch.device | str = "cpu") -> dict[str, Any]:
    """The checkpoint of ``run_dir`` (``weights_only`` loading, tensors mapped to ``device``), its
    checksum verified; an unreadable, corrupted or older checkpoint is a ``ConfigError``."""
    path = Path(run_dir) / FILENAME
    if not path.is_file():
        raise ConfigError(f"resume={run_dir}: no {FILENAME} there (runs write one every checkpoint_every rounds)")
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as err:  # a torn zip, garbage bytes, an unpickling refusal: all mean "not a checkpoint"
        raise ConfigError(f"resume={run_dir}: {path} cannot be read ({type(err).__name__}: "
                          f"{str(err).splitlines()[0] if str(err) else 'no message'}); it is truncated or corrupted, "
                          "start the run again without `resume`") from None
    found = state.get("format") if isinstance(state, dict) else None
    if found != FORMAT:
        raise ConfigError(f"resume={run_dir}: its {FILENAME} has format {found}, this version reads format {FORMAT} "
                          "only (older checkpoints have no checksum or were written before the round pipeline "
                          "changed, and cannot be resumed); start the run again without `resume`")
    checksum = state.pop("sha256", None)
    if checksum != content_digest(state):
        raise ConfigError(f"resume={run_dir}: {path} is corrupted (its contents do not match their SHA-256 "
                          "checksum); start the run again without `resume`")
    return state


def check_data_fingerprint(run_dir: str | Path, saved: str, current: str) -> None:
    """Refuse to resume on data that differ from the data the run was checkpointed with."""
    if saved != current:
        raise ConfigError(f"resume={run_dir}: the dataset differs from the one this run was trained on (fingerprint "
                          f"{current[:12]}, checkpoint {saved[:12]}): its files changed or are corrupted")


FINGERPRINT_SAMPLE = 1024
"""Rows of a memory-mapped (lazy) image split that its fingerprint reads, evenly spaced."""


def data_fingerprint(data: Any) -> str:
    """The ``content_digest`` of a dataset bundle's train and test splits (images, labels, domains):
    checked on resume, so a run never continues on files that changed or were corrupted since. A
    memory-mapped image split (``data/lazy.py``) contributes ``FINGERPRINT_SAMPLE`` of its rows."""
    parts = []
    for split in (data.train, data.test):
        x = split.x
        if not isinstance(x, torch.Tensor):
            x = x[torch.linspace(0, len(split) - 1, min(FINGERPRINT_SAMPLE, len(split)), device="cpu").long()]
        parts.append([x, split.y, split.domain])
    return content_digest(parts)


def content_digest(tree: Any) -> str:
    """SHA-256 of a checkpoint-like tree (dicts in key order, lists, tensors' dtype, shape and bytes,
    numbers, strings, ``None``): equal trees, equal digests, on any device. Any other value is a
    ``TypeError``: ``weights_only`` loading would refuse it, so a run would checkpoint and never resume."""
    digest = hashlib.sha256()
    _hash_into(digest, tree)
    return digest.hexdigest()


def _hash_into(digest: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        flat = value.detach().cpu().contiguous().reshape(-1)
        digest.update(f"T{value.dtype}{tuple(value.shape)}".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    elif isinstance(value, dict):
        digest.update(f"D{len(value)}".encode())
        for key, item in value.items():
            digest.update(f"K{key!r}".encode())
            _hash_into(digest, item)
    elif isinstance(value, (list, tuple)):
        digest.update(f"L{len(value)}".encode())
        for item in value:
            _hash_into(digest, item)
    elif value is None or isinstance(value, (bool, int, float, str)):
        digest.update(f"V{value!r}".encode())
    else:  # weights_only loading would refuse it at resume: refuse it at the first checkpoint instead
        raise TypeError(f"a checkpoint holds only tensors, dicts, lists, numbers, strings and None, not "
                        f"{type(value).__module__}.{type(value).__qualname__}")


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
