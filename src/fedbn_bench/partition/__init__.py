"""Client partitions: labels (+ optional domain ids) -> one index tensor per client.

Every partition is deterministic given the seed, returns a disjoint and
complete split of ``range(len(labels))`` and gives each client its indices
sorted ascending.  Partitions live one per module in this package and register
themselves, with their config schema (a dataclass), by :func:`register_partition`;
any public module dropped into the package is imported automatically.  A
composed ``cfg.partition`` runs as
``make_partition(cfg.partition.name, labels, n, seed, **partition_params(cfg.partition))``.

Available partitions (see each module for details):

``iid``        random permutation cut into near-equal parts
``dirichlet``  label skew ~ Dir(alpha): per-class over clients (HBN's code, NIID-Bench) or
               per-client over classes with equal sizes (Hsu et al. 2019)
``shards``     ``classes_per_client`` classes per client, or McMahan's sorted shards
``gamma``      gamma-similarity (FBN paper, section 4)
``domains``    feature shift: each client holds samples of one domain (FedBN)
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from omegaconf import DictConfig, OmegaConf

from ._registry import PARTITIONS, PartitionError, check_int, register_partition

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "PARTITIONS",
    "PartitionError",
    "register_partition",
    "make_partition",
    "partition_params",
    "partition_table",
    "client_domains",
    "follow_partition",
]

# import every partition module so that it registers itself
for _info in pkgutil.iter_modules(__path__):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")

from ._follow import follow_partition  # noqa: E402
from .domains import client_domains  # noqa: E402


def make_partition(
    name: str,
    labels: torch.Tensor,
    num_clients: int,
    seed: int,
    *,
    domains: torch.Tensor | None = None,
    **params: Any,
) -> list[torch.Tensor]:
    """Split ``range(len(labels))`` among ``num_clients`` clients.

    ``name`` selects an entry of :data:`PARTITIONS`; ``params`` are that
    partition's own config keys (e.g. ``alpha`` for ``dirichlet``).  Returns a
    list of ``num_clients`` int64 CPU tensors.  Raises :class:`PartitionError`
    for an invalid configuration.
    """
    partition = PARTITIONS.get(name)
    seed = check_int("seed", seed)
    generator = torch.Generator().manual_seed(seed)
    return partition(labels, num_clients, generator, domains=domains, **params)


def partition_params(cfg: DictConfig | Mapping[str, Any]) -> dict[str, Any]:
    """The partition's own keys of a ``partition`` config (all but ``name``), as plain Python values."""
    params = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    params.pop("name", None)
    return params


def partition_table(labels: torch.Tensor, parts: list[torch.Tensor], num_classes: int) -> pd.DataFrame:
    """Clients x classes sample counts as a pandas DataFrame.

    Index ``client`` (0..n-1), columns ``class_0 .. class_{K-1}`` and ``total``.
    """
    import pandas as pd

    labels = torch.as_tensor(labels).detach().to("cpu", torch.int64).reshape(-1)
    num_classes = check_int("num_classes", num_classes, minimum=1)
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
        raise PartitionError(
            f"num_classes must exceed every label (got num_classes={num_classes}, "
            f"labels in [{int(labels.min())}, {int(labels.max())}])"
        )
    n = len(parts)
    idx = [torch.as_tensor(p).to("cpu", torch.int64).reshape(-1) for p in parts]
    sizes = torch.tensor([p.numel() for p in idx], dtype=torch.int64)
    if n:
        owner = torch.repeat_interleave(torch.arange(n), sizes)
        flat = torch.cat(idx)
        counts = torch.bincount(owner * num_classes + labels[flat], minlength=n * num_classes)
        counts = counts.reshape(n, num_classes)
    else:
        counts = torch.zeros(0, num_classes, dtype=torch.int64)
    table = pd.DataFrame(
        counts.numpy(),
        index=pd.RangeIndex(n, name="client"),
        columns=[f"class_{k}" for k in range(num_classes)],
    )
    table["total"] = sizes.numpy()
    return table
