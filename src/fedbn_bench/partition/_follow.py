"""A test split per client that follows its training partition (LEAF and FL-bench split each
client's own data; with one shared test set, the same effect): client ``c`` receives, of every
class, the share of that class's test samples that it holds of the class's training samples."""
from __future__ import annotations

import torch


def follow_partition(train_labels: torch.Tensor, parts: list[torch.Tensor], test_labels: torch.Tensor,
                     num_classes: int, generator: torch.Generator) -> list[torch.Tensor]:
    """Per client, indices into ``test_labels``: each class's test samples, in a random order
    (``generator``), cut at the clients' cumulative shares of that class in training (rounded),
    so the splits are disjoint and cover every class some client trains on; a class no client
    trains on goes to none. O(classes x clients)."""
    n = len(parts)
    sizes = torch.tensor([len(p) for p in parts], dtype=torch.int64, device="cpu")
    owner = torch.repeat_interleave(torch.arange(n, device="cpu"), sizes)
    labels = train_labels.to("cpu", torch.int64)[torch.cat([p.to("cpu") for p in parts])]
    counts = torch.bincount(labels * n + owner, minlength=num_classes * n).view(num_classes, n).double()
    totals = counts.sum(1, keepdim=True)
    test_labels = test_labels.to("cpu", torch.int64)
    test_counts = torch.bincount(test_labels, minlength=num_classes).double()
    cuts = torch.round(counts.cumsum(1) / totals.clamp(min=1) * test_counts[:, None]).to(torch.int64)
    cuts[:, -1] = torch.where(totals[:, 0] > 0, test_counts.to(torch.int64), 0)
    per_client = torch.diff(cuts, dim=1, prepend=torch.zeros(num_classes, 1, dtype=torch.int64, device="cpu"))
    perm = torch.randperm(len(test_labels), generator=generator, device="cpu")
    order = perm[torch.argsort(test_labels[perm], stable=True)]  # grouped by class, random inside
    starts = torch.cumsum(test_counts.to(torch.int64), 0) - test_counts.to(torch.int64)
    owner_test = torch.full((len(test_labels),), -1, dtype=torch.int64, device="cpu")
    for k in range(num_classes):
        assigned = int(cuts[k, -1])
        owner_test[order[starts[k]: starts[k] + assigned]] = torch.repeat_interleave(
            torch.arange(n, device="cpu"), per_client[k])
    kept = torch.nonzero(owner_test >= 0).flatten()
    grouped = kept[torch.argsort(owner_test[kept], stable=True)]
    return list(torch.split(grouped, torch.bincount(owner_test[kept], minlength=n).tolist()))
