"""``dirichlet``: label skew with per-class Dirichlet proportions (Hsu et al. 2019).

For every class ``k`` a vector ``p_k ~ Dir(alpha * 1_n)`` over the
``num_clients`` clients is drawn and the class's samples (in random order) are
cut at the rounded cumulative proportions.  Small ``alpha`` gives each client
few classes; large ``alpha`` approaches an iid split.

Minimum size: if some client ends up with fewer than ``min_size`` samples the
whole draw is repeated, at most ``MAX_REDRAWS`` times.  If no draw satisfies
the constraint, the draw with the smallest total shortfall is repaired
deterministically: each under-sized client (in client order) takes samples
from whichever client is currently the largest, from that client's most
frequent class first, never pushing the donor below ``min_size``.  This
always succeeds when ``num_clients * min_size <= N``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ._registry import PartitionError, check_float, check_int, grouped_order, parts_from_owner, register_partition

MAX_REDRAWS = 100


@dataclass
class DirichletConfig:
    """Schema of ``partition=dirichlet``: concentration ``alpha`` (> 0) and the minimum client size."""

    name: str = "dirichlet"
    alpha: float = 0.5
    min_size: int = 10


def _log_dirichlet(rng: np.random.Generator, alpha: float, rows: int, cols: int) -> np.ndarray:
    """Unnormalised log-weights whose row-wise softmax is ``Dir(alpha)``-distributed.

    Uses ``Gamma(a) = Gamma(a + 1) * U**(1/a)`` in log space so that tiny
    ``alpha`` does not underflow to an all-zero row.
    """
    log_g = np.log(rng.standard_gamma(alpha + 1.0, size=(rows, cols)))
    log_u = np.log(rng.random(size=(rows, cols)) + np.finfo(np.float64).tiny)
    return log_g + log_u / alpha


def _draw_counts(rng: np.random.Generator, alpha: float, class_counts: np.ndarray, num_clients: int) -> np.ndarray:
    """Classes x clients sample counts for one Dirichlet draw."""
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


@register_partition("dirichlet", DirichletConfig)
def dirichlet(
    labels: torch.Tensor,
    num_clients: int,
    generator: torch.Generator,
    *,
    domains=None,
    alpha: float,
    min_size: int = 10,
) -> list[torch.Tensor]:
    alpha = check_float("alpha", alpha, partition="dirichlet")
    if alpha <= 0:
        raise PartitionError(f"alpha must be > 0 for partition 'dirichlet' (got {alpha})")
    min_size = check_int("min_size", min_size, minimum=0, partition="dirichlet")
    n = labels.numel()
    if num_clients * min_size > n:
        raise PartitionError(
            f"min_size * num_clients must be <= number of samples for partition 'dirichlet' "
            f"(got min_size={min_size}, num_clients={num_clients}, {n} samples)"
        )

    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    rng = np.random.default_rng(seed)
    class_counts = torch.bincount(labels).numpy().astype(np.int64)

    best, best_short = None, None
    for _ in range(MAX_REDRAWS):
        counts = _draw_counts(rng, alpha, class_counts, num_clients)
        short = int(np.clip(min_size - counts.sum(axis=0), 0, None).sum())
        if best_short is None or short < best_short:
            best, best_short = counts, short
        if short == 0:
            break
    if best_short:
        best = _repair(best, min_size)

    # samples grouped by class (random order inside a class), owners laid out class by class
    order = grouped_order(labels, generator)
    owner_in_order = torch.repeat_interleave(
        torch.arange(num_clients).repeat(class_counts.size), torch.from_numpy(best.reshape(-1))
    )
    owner = torch.empty(n, dtype=torch.int64)
    owner[order] = owner_in_order
    return parts_from_owner(owner, num_clients)
