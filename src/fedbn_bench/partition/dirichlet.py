"""``dirichlet``: label skew drawn from Dirichlet distributions, in one of two schemes.

``scheme="per_class"`` (default): for every class ``k`` a vector ``p_k ~ Dir(alpha * 1_n)`` over
the ``num_clients`` clients is drawn and the class's samples (in random order) are cut at the
rounded cumulative proportions, so client sizes are unequal.  This is the scheme of HBN's released
code (``FedBaseline/sampling/sampling.py``, ``DatasetDivide``; it cuts with ``floor`` where this
module rounds) and of NIID-Bench (Li et al. 2022, "Federated learning on non-IID data silos: an
experimental study"), whose ``min_size`` redraw is kept (NIID-Bench also stops giving a class to
clients that already hold N/n samples; that step is not done here).

``scheme="per_client"``: Hsu et al. 2019, "Measuring the effects of non-identical data
distribution for federated visual classification", §3 -- the scheme FixBN §4.1 "follows [55]".
Every client ``i`` draws class proportions ``q_i ~ Dir(alpha * p)``, ``p`` being the class prior
(the label frequencies), and holds ``N / n`` samples (sizes differ by at most one, the larger ones
first).  Samples are drawn without replacement, client by client in index order: client ``i``
asks for ``size_i * q_i``, rounded at the cumulative proportions as above; a class with fewer
samples left than asked gives all it has, and the shortfall is asked again from the classes that
still have samples, in proportion to ``q_i`` renormalised over them (in log space, so a ``q_i``
that underflows to zero there still picks its largest remaining entry), until the client is full.
The sizes sum to ``N``, so the last client takes exactly what is left.

Small ``alpha`` gives each client few classes (about one under ``per_client``); large ``alpha``
approaches an iid split under both schemes.

``min_size="auto"`` (the default) is 10 where ``num_clients * 10 <= N`` and 1 otherwise (every client
holds a sample: cross-device federations of a few samples a client, e.g. 10,000 clients of
Fashion-MNIST's 60,000, where a minimum of 10 cannot hold).

Minimum size (``per_class``): if some client ends up with fewer than ``min_size`` samples the
whole draw is repeated, at most ``MAX_REDRAWS`` times.  If no draw satisfies the constraint, the
draw with the smallest total shortfall is repaired deterministically: each under-sized client (in
client order) takes samples from whichever client is currently the largest, from that client's
most frequent class first, never pushing the donor below ``min_size``.  This always succeeds when
``num_clients * min_size <= N``.  ``min_size=0`` keeps the draw unconditioned, as HBN's code does
(clients may then be tiny or empty; the run's ``small_clients`` policy decides what happens to
clients smaller than a batch).  Under ``per_client`` every client holds at least ``floor(N / n)``
samples, so ``min_size`` holds whenever ``num_clients * min_size <= N`` (which is checked).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ._registry import (
    PartitionError,
    check_float,
    check_int,
    grouped_order,
    near_equal_sizes,
    parts_from_owner,
    register_partition,
)

MAX_REDRAWS = 100
AUTO_MIN_SIZE = 10
"""``min_size="auto"``: this minimum where it can hold, else 1."""
SCHEMES = ("per_class", "per_client")


@dataclass
class DirichletConfig:
    """Schema of ``partition=dirichlet``: concentration ``alpha`` (> 0), the minimum client size
    and the ``scheme`` (per_class | per_client)."""

    name: str = "dirichlet"
    alpha: float = 0.5
    min_size: Any = "auto"
    scheme: str = "per_class"


def _log_dirichlet(rng: np.random.Generator, alpha: float | np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Unnormalised log-weights whose row-wise softmax is ``Dir(alpha)``-distributed.

    ``alpha`` is a scalar or one positive concentration per column.  Uses
    ``Gamma(a) = Gamma(a + 1) * U**(1/a)`` in log space so that tiny ``alpha`` does not underflow
    to an all-zero row.
    """
    log_g = np.log(rng.standard_gamma(alpha + 1.0, size=(rows, cols)))
    log_u = np.log(rng.random(size=(rows, cols)) + np.finfo(np.float64).tiny)
    return log_g + log_u / alpha


def _draw_counts(rng: np.random.Generator, alpha: float, class_counts: np.ndarray, num_clients: int) -> np.ndarray:
    """Classes x clients sample counts for one per-class Dirichlet draw."""
    logw = _log_dirichlet(rng, alpha, class_counts.size, num_clients)
    logw -= logw.max(axis=1, keepdims=True)
    w = np.exp(logw)
    p = w / w.sum(axis=1, keepdims=True)
    cuts = np.rint(np.cumsum(p, axis=1) * class_counts[:, None]).astype(np.int64)
    cuts[:, -1] = class_counts
    cuts = np.maximum.accumulate(np.minimum(cuts, class_counts[:, None]), axis=1)
    return np.diff(cuts, axis=1, prepend=0)


def _repair(counts: np.ndarray, min_size: int) -> np.ndarray:
    """Move samples from the largest clients to those below ``min_size`` (deterministic)."""
    counts = counts.copy()
    sizes = counts.sum(axis=0)
    for i in np.flatnonzero(sizes < min_size):
        need = int(min_size - sizes[i])
        while need > 0:
            j = int(np.argmax(sizes))  # first largest client
            take = min(need, int(sizes[j]) - min_size)
            if take <= 0:  # unreachable when num_clients * min_size <= N
                raise PartitionError("min_size cannot be satisfied for this num_clients")
            for k in np.argsort(-counts[:, j], kind="stable"):
                if take == 0:
                    break
                m = min(take, int(counts[k, j]))
                counts[k, j] -= m
                counts[k, i] += m
                sizes[j] -= m
                sizes[i] += m
                need -= m
                take -= m
    return counts


def _per_class_counts(rng: np.random.Generator, alpha: float, class_counts: np.ndarray, num_clients: int,
                      min_size: int) -> np.ndarray:
    """Classes x clients counts of the per-class scheme, conditioned on ``min_size`` (module doc)."""
    best, best_short = None, None
    for _ in range(MAX_REDRAWS):
        counts = _draw_counts(rng, alpha, class_counts, num_clients)
        short = int(np.clip(min_size - counts.sum(axis=0), 0, None).sum())
        if best_short is None or short < best_short:
            best, best_short = counts, short
        if short == 0:
            break
    return _repair(best, min_size) if best_short else best


def _split(total: int, p: np.ndarray) -> np.ndarray:
    """Integers summing to ``total``, cut at the rounded cumulative proportions ``p`` (sums to one)."""
    cuts = np.rint(np.cumsum(p) * total).astype(np.int64)
    cuts[-1] = total
    cuts = np.maximum.accumulate(np.minimum(cuts, total))
    return np.diff(cuts, prepend=0)


def _per_client_counts(rng: np.random.Generator, alpha: float, class_counts: np.ndarray,
                       num_clients: int) -> np.ndarray:
    """Classes x clients counts of Hsu et al.'s scheme: ``q_i ~ Dir(alpha * p)``, equal sizes,
    without replacement, classes running out handled as the module doc says."""
    present = np.flatnonzero(class_counts)
    prior = class_counts[present] / class_counts.sum()
    logq = np.full((num_clients, class_counts.size), -np.inf)
    logq[:, present] = _log_dirichlet(rng, alpha * prior, num_clients, present.size)
    left = class_counts.copy()
    counts = np.zeros((class_counts.size, num_clients), dtype=np.int64)
    for i, size in enumerate(near_equal_sizes(int(class_counts.sum()), num_clients).tolist()):
        need = size
        while need > 0:  # each pass fills the client or empties a class
            avail = np.flatnonzero(left)
            w = np.exp(logq[i, avail] - logq[i, avail].max())
            take = np.minimum(_split(need, w / w.sum()), left[avail])
            counts[avail, i] += take
            left[avail] -= take
            need -= int(take.sum())
    return counts


@register_partition("dirichlet", DirichletConfig)
def dirichlet(
    labels: torch.Tensor,
    num_clients: int,
    generator: torch.Generator,
    *,
    domains=None,
    alpha: float,
    min_size: int | str = "auto",
    scheme: str = "per_class",
) -> list[torch.Tensor]:
    alpha = check_float("alpha", alpha, partition="dirichlet")
    if alpha <= 0:
        raise PartitionError(f"alpha must be > 0 for partition 'dirichlet' (got {alpha})")
    if min_size == "auto":
        min_size = AUTO_MIN_SIZE if num_clients * AUTO_MIN_SIZE <= labels.numel() else 1
    min_size = check_int("min_size", min_size, minimum=0, partition="dirichlet")
    if scheme not in SCHEMES:
        raise PartitionError(f"scheme must be one of {', '.join(SCHEMES)} for partition 'dirichlet' (got {scheme!r})")
    n = labels.numel()
    if num_clients * min_size > n:
        raise PartitionError(
            f"min_size * num_clients must be <= number of samples for partition 'dirichlet' "
            f"(got min_size={min_size}, num_clients={num_clients}, {n} samples)"
        )

    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    rng = np.random.default_rng(seed)
    class_counts = torch.bincount(labels).numpy().astype(np.int64)
    if scheme == "per_class":
        counts = _per_class_counts(rng, alpha, class_counts, num_clients, min_size)
    else:
        counts = _per_client_counts(rng, alpha, class_counts, num_clients)

    # samples grouped by class (random order inside a class), owners laid out class by class
    order = grouped_order(labels, generator)
    owner_in_order = torch.repeat_interleave(
        torch.arange(num_clients).repeat(class_counts.size), torch.from_numpy(counts.reshape(-1))
    )
    owner = torch.empty(n, dtype=torch.int64)
    owner[order] = owner_in_order
    return parts_from_owner(owner, num_clients)
