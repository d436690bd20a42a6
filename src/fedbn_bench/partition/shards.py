"""``shards``: pathological label skew.

``mode="classes"`` (default)
    Each client gets exactly ``classes_per_client`` distinct classes (default 2).
    The ``num_clients * classes_per_client`` class slots are filled round-robin
    over a random permutation of the classes present in ``labels``, so every
    class is held by ``floor`` or ``ceil`` of ``num_clients * classes_per_client
    / num_classes`` clients, and client ``c`` holds the classes at consecutive
    positions ``c * classes_per_client, ...`` of that cycle (all distinct).
    Each class's samples are shuffled and split evenly (sizes differ by at most
    one) among the clients that hold it.

``mode="sorted"`` (McMahan et al. 2017)
    Samples are sorted by label (random order inside a class) and cut into
    ``num_clients * shards_per_client`` shards of equal size (differing by at
    most one when N does not divide evenly); each client receives
    ``shards_per_client`` shards chosen at random.

The count belonging to the other mode is unused, but must still be a valid count (>= 1): a value
no mode can mean is refused rather than silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._registry import PartitionError, check_int, grouped_order, near_equal_sizes, parts_from_owner, register_partition

MODES = ("classes", "sorted")


@dataclass
class ShardsConfig:
    """Schema of ``partition=shards``: ``mode`` (classes | sorted) and each mode's count per client."""

    name: str = "shards"
    mode: str = "classes"
    classes_per_client: int = 2
    shards_per_client: int = 2


def _by_classes(labels: torch.Tensor, num_clients: int, generator: torch.Generator, cpc: int) -> torch.Tensor:
    n = labels.numel()
    class_counts_all = torch.bincount(labels)
    present = torch.nonzero(class_counts_all).flatten()
    num_classes = present.numel()
    if cpc > num_classes:
        raise PartitionError(
            f"classes_per_client must be <= the number of classes ({num_classes}) for partition 'shards' (got {cpc})"
        )
    if num_clients * cpc < num_classes:
        raise PartitionError(
            f"classes_per_client * num_clients must be >= the number of classes ({num_classes}) so that no "
            f"class is dropped (got classes_per_client={cpc}, num_clients={num_clients})"
        )
    # slot s (client s // cpc) holds class cycle[s % num_classes]
    cycle = present[torch.randperm(num_classes, generator=generator)]
    slots = torch.arange(num_clients * cpc)
    slot_class = cycle[slots % num_classes]
    slot_client = slots // cpc
    # holders of each class, in client order: sort slots by class (stable)
    by_class = torch.argsort(slot_class, stable=True)
    holders = slot_client[by_class]
    n_holders = torch.bincount(slot_class, minlength=class_counts_all.numel())
    first_holder = torch.cumsum(n_holders, 0) - n_holders

    class_counts = class_counts_all
    too_small = (n_holders > class_counts) & (n_holders > 0)
    if bool(too_small.any()):
        k = int(torch.nonzero(too_small)[0])
        raise PartitionError(
            f"classes_per_client={cpc} with num_clients={num_clients} gives class {k} "
            f"{int(n_holders[k])} holders but it has only {int(class_counts[k])} samples"
        )

    # rank of each sample inside its class (random order), then an even split among holders
    order = grouped_order(labels, generator)
    lab = labels[order]
    class_start = torch.cumsum(class_counts, 0) - class_counts
    rank = torch.arange(n) - class_start[lab]
    h = n_holders[lab]
    # contiguous near-equal chunks: rank r of n_k goes to holder floor(r * h / n_k)
    which = torch.div(rank * h, class_counts[lab], rounding_mode="floor")
    owner = torch.empty(n, dtype=torch.int64)
    owner[order] = holders[first_holder[lab] + which]
    return owner


def _sorted_shards(labels: torch.Tensor, num_clients: int, generator: torch.Generator, spc: int) -> torch.Tensor:
    n = labels.numel()
    num_shards = num_clients * spc
    if num_shards > n:
        raise PartitionError(
            f"shards_per_client * num_clients must be <= number of samples ({n}) for partition 'shards' "
            f"(got shards_per_client={spc}, num_clients={num_clients})"
        )
    order = grouped_order(labels, generator)
    shard_of_position = torch.repeat_interleave(torch.arange(num_shards), near_equal_sizes(n, num_shards))
    shard_client = torch.empty(num_shards, dtype=torch.int64)
    shard_client[torch.randperm(num_shards, generator=generator)] = torch.arange(num_shards) // spc
    owner = torch.empty(n, dtype=torch.int64)
    owner[order] = shard_client[shard_of_position]
    return owner


@register_partition("shards", ShardsConfig)
def shards(
    labels: torch.Tensor,
    num_clients: int,
    generator: torch.Generator,
    *,
    domains=None,
    mode: str = "classes",
    classes_per_client: int = 2,
    shards_per_client: int = 2,
) -> list[torch.Tensor]:
    if mode not in MODES:
        raise PartitionError(f"mode must be one of {', '.join(MODES)} for partition 'shards' (got {mode!r})")
    cpc = check_int("classes_per_client", classes_per_client, minimum=1, partition="shards")
    spc = check_int("shards_per_client", shards_per_client, minimum=1, partition="shards")
    if mode == "classes":
        owner = _by_classes(labels, num_clients, generator, cpc)
    else:
        owner = _sorted_shards(labels, num_clients, generator, spc)
    return parts_from_owner(owner, num_clients)
