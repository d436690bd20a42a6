"""FedBN's synthetic two-client data (fedbn_local_batch_normalization.txt App. F, Fig. 9).

Two domains, one per client, binary labels: in domain ``d`` class 0 is drawn from ``N(−m·1, Σ_d)``
and class 1 from ``N(+m·1, Σ_d)`` in ``dim = 10`` dimensions, ``m = 1``. ``Σ₁ = I`` ("diagonal");
``Σ₂`` "is different from Σ₁ by having non-zero values on off-diagonal entries" (the caption: client 2
is "a combination of Diagonal Gaussian and Full Gaussian"). The paper gives no values; we take unit
variances (the diagonal of Σ₁) with AR(1) correlations ``Σ₂[i, j] = ρ^|i−j|``, ``ρ = 0.5``: every
off-diagonal entry is non-zero (0.5, 0.25, ...), only the correlation differs from client 1, and the
classes stay nearly separable (Mahalanobis half-distance between the class means 2 instead of √10:
Bayes accuracy about 97.7 %, against 99.9 % under Σ₁; the paper reports 100 % for both methods).
The values stay raw (not standardized): the covariance shift is what the experiment studies. Train
and test draw independent streams of ``seed``; ``Split.domain`` is the client's domain
(``partition=domains``, one client per domain).
"""

from __future__ import annotations

import torch

from .base import DatasetBundle, DatasetError, Split, require_positive_integers
from .registry import make_generator, register_dataset

DOMAINS = ("diagonal", "full")
MAX_DIM = 4096
"""Largest feature dimension (each domain draws a dim x dim covariance)."""


def covariances(dim: int = 10, rho: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """``(Σ₁, Σ₂)`` in float64: the identity and the AR(1) correlation ``ρ^|i−j|``."""
    idx = torch.arange(dim, dtype=torch.float64)
    return torch.eye(dim, dtype=torch.float64), rho ** (idx.view(-1, 1) - idx.view(1, -1)).abs()


def _sample(covs: tuple[torch.Tensor, ...], per_class: int, mean: float, gen: torch.Generator) -> Split:
    xs, ys, ds = [], [], []
    for d, cov in enumerate(covs):
        chol = torch.linalg.cholesky(cov)
        for label, sign in ((0, -1.0), (1, 1.0)):
            z = torch.randn(per_class, cov.shape[0], generator=gen, dtype=torch.float64)
            xs.append(sign * mean + z @ chol.T)
            ys.append(torch.full((per_class,), label, dtype=torch.int64))
            ds.append(torch.full((per_class,), d, dtype=torch.int64))
    perm = torch.randperm(len(covs) * 2 * per_class, generator=gen)
    return Split(x=torch.cat(xs)[perm].float(), y=torch.cat(ys)[perm], domain=torch.cat(ds)[perm])


@register_dataset("fedbn_gaussians", normalize=False, natural_domains=True)
def load_fedbn_gaussians(
    *,
    root: str = "data",
    download: bool = False,
    seed: int = 0,
    dim: int = 10,
    samples_per_class: int = 50,
    test_samples_per_class: int = 100,
    rho: float = 0.5,
    mean: float = 1.0,
) -> DatasetBundle:
    """Both domains' samples (``samples_per_class`` per class and domain), float32 ``(N, dim)``."""
    del root, download
    require_positive_integers("fedbn_gaussians", dim=dim, samples_per_class=samples_per_class,
                              test_samples_per_class=test_samples_per_class)
    if dim > MAX_DIM:
        raise DatasetError(f"fedbn_gaussians: dim must be at most {MAX_DIM} (a dim x dim covariance is drawn), got {dim}")
    if not -1.0 < float(rho) < 1.0:
        raise DatasetError(f"fedbn_gaussians: rho must be in (-1, 1) (Σ₂ = ρ^|i-j| positive definite), got {rho!r}")
    covs = covariances(int(dim), float(rho))
    train = _sample(covs, int(samples_per_class), float(mean), make_generator(seed, 61, 0))
    test = _sample(covs, int(test_samples_per_class), float(mean), make_generator(seed, 61, 1))
    return DatasetBundle(name="fedbn_gaussians", train=train, test=test, num_classes=2,
                         domain_names=list(DOMAINS), is_image=False)
