"""Deterministic randomness: every draw derives from (seed, round, client).

A resumed or re-run simulation therefore replays exactly the same client sampling, batches,
augmentations and dropout masks, whatever happened before (FedJAX-style per-round keys). Each
kind of draw has its own stream key, so adding draws of one kind never shifts another.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import torch

from fedbn_bench.data import random_crop_flip

AUGMENT_STREAM = 1
"""Extra key of a client's augmentation generator: ``(seed, round, client, AUGMENT_STREAM)``."""
DROPOUT_STREAM = 2
"""Extra key of the global torch seed set before a client's (or a vmapped round's) training."""
STATISTICS_STREAM = 3
"""Extra key of the samples a client's pre-training statistics pass reads (HBN §5)."""
EVALUATION_STREAM = 4
"""Extra key of the clients an evaluation tests: ``(seed, round, EVALUATION_STREAM)``."""


def derive_seed(*keys: int) -> int:
    """A 63-bit seed mixed from integer keys (NumPy's SeedSequence hashing)."""
    return int(np.random.SeedSequence([int(k) for k in keys]).generate_state(2, np.uint64)[0] >> 1)


def generator(*keys: int, device: Optional[torch.device] = None) -> torch.Generator:
    """A generator seeded from ``keys``, e.g. ``generator(seed, round, client)`` (CPU by default)."""
    return torch.Generator(device=device or "cpu").manual_seed(derive_seed(*keys))


def seed_global(*keys: int) -> None:
    """Seed torch's global generators (dropout and other module-internal draws) from ``keys``."""
    torch.manual_seed(derive_seed(*keys, DROPOUT_STREAM))


def sample_clients(num_clients: int, per_round: int, gen: torch.Generator) -> list[int]:
    """``per_round`` distinct client ids, sorted; all clients when ``per_round >= num_clients``."""
    if per_round >= num_clients:
        return list(range(num_clients))
    return sorted(torch.randperm(num_clients, generator=gen, device=gen.device)[:per_round].tolist())


def evaluated_clients(num_clients: int, per_evaluation: int | None, seed: int, round_number: int) -> list[int] | None:
    """The clients an evaluation after ``round_number`` rounds tests: ``per_evaluation`` drawn from
    ``(seed, round_number, EVALUATION_STREAM)`` (Flower's ``fraction_evaluate``), the same in a
    resumed run; ``None`` (all) when ``per_evaluation`` is ``None`` or at least ``num_clients``."""
    if per_evaluation is None or per_evaluation >= num_clients:
        return None
    return sample_clients(num_clients, per_evaluation, generator(seed, round_number, EVALUATION_STREAM))


def participating(clients: Sequence[int], sizes: torch.Tensor, batch_size: int) -> list[int]:
    """The sampled ``clients`` that take part in the round: those holding at least one full batch.

    ``sizes[c]`` is client ``c``'s number of samples. A client with fewer than ``batch_size``
    samples has no full batch (``draw_batches`` drops the partial one), so, as in HBN's code
    (``FedAvg_main.py`` and its siblings), it neither trains nor uploads, and the round's
    aggregation weights are those of the remaining clients. Such clients exist only under
    ``small_clients=skip`` (``config.validate.validate_client_sizes`` refuses them otherwise, so
    this returns ``clients`` unchanged there). The result may be empty.
    """
    return [c for c in clients if int(sizes[c]) >= batch_size]


def draw_batches(indices: torch.Tensor, batch_size: int, steps: int, gen: torch.Generator) -> torch.Tensor:
    """A ``(steps, batch_size)`` tensor of sample indices drawn epoch by epoch without replacement.

    Each epoch is a fresh permutation of the client's indices with its last partial batch dropped,
    so every step sees a full batch; epochs follow one another until ``steps`` batches are drawn.
    A client smaller than a batch (``small_clients=cycle``) has epochs of one batch: a fresh
    permutation of its indices repeated to ``batch_size`` (each sample ``batch_size // n`` times
    or once more).
    """
    n = len(indices)
    if n < batch_size:
        reps = -(-batch_size // n)
        order = torch.stack([torch.randperm(n, generator=gen, device=gen.device).repeat(reps)[:batch_size]
                             for _ in range(steps)]).to(indices.device)
        return indices[order]
    per_epoch = n // batch_size
    epochs = -(-steps // per_epoch)
    orders = [torch.randperm(n, generator=gen, device=gen.device)[: per_epoch * batch_size] for _ in range(epochs)]
    order = torch.cat(orders)[: steps * batch_size].to(indices.device)
    return indices[order].view(steps, batch_size)


def draw_union_batches(indices: torch.Tensor, strata: list[int], batch_size: int, steps: int, seed: int,
                       round_idx: int) -> torch.Tensor:
    """A ``(steps, batch_size)`` tensor whose every row is the union of one batch of
    ``batch_size // len(strata)`` per stratum: ``indices`` is the concatenation of the strata
    (``strata`` their sizes), stratum ``k`` draws as client ``k`` would (``draw_batches`` with
    the generator ``(seed, round, k)``), so a pooled client sees exactly the union of the
    batches its original clients would draw (FBN Remark 4.1)."""
    per_stratum, rest = divmod(batch_size, len(strata))
    if rest:
        raise ValueError(f"a union batch of {batch_size} cannot hold equal batches of {len(strata)} strata")
    blocks = torch.split(indices, strata)
    return torch.cat([draw_batches(block, per_stratum, steps, generator(seed, round_idx, k))
                      for k, block in enumerate(blocks)], dim=1)


def client_round_batches(
    x: torch.Tensor,
    y: torch.Tensor,
    indices: torch.Tensor,
    batch_size: int,
    steps: int,
    keys: tuple[int, int, int],
    augment: bool,
    padding: int = 4,
    fill: Optional[torch.Tensor] = None,
    strata: Optional[list[int]] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """All batches of one client in one round, gathered at once: ``(steps, B, ...)`` inputs and
    ``(steps, B)`` labels. ``keys`` is ``(seed, round, client)``; the batches come from its
    generator (with ``strata``, from ``draw_union_batches``), the augmentation (random crop + flip, ``padding`` pixels of ``fill``: the train
    split's ``crop_padding`` and ``pad_value``) from its augmentation stream on ``x``'s device.
    Both engines call this, so they see identical batches.
    """
    if strata is None:
        index_batches = draw_batches(indices, batch_size, steps, generator(*keys))
    else:
        index_batches = draw_union_batches(indices, strata, batch_size, steps, keys[0], keys[1])
    flat = index_batches.reshape(-1)
    xb = x[flat]
    if augment:
        xb = random_crop_flip(xb, generator(*keys, AUGMENT_STREAM, device=xb.device), padding, fill=fill)
    return xb.view(steps, batch_size, *xb.shape[1:]), y[index_batches]
