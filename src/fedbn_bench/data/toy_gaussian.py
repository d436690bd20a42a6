"""Two-dimensional Gaussian classes of the FBN paper (Section 3).

Class ``k`` (0-based; the paper's label ``i = k + 1``) is drawn from
``N(mu_k, std^2 I_2)`` with ``mu_k = radius * (cos(2 pi k / K), sin(2 pi k / K))``.
The paper uses K = 10, radius = 10, std = 1 and m = 30 points per class.
The coordinates are returned raw (not normalized): normalization is what the
example studies.
"""

from __future__ import annotations

import math

import torch

from .base import DatasetBundle, DatasetError, Split, require_positive_integers
from .registry import make_generator, register_dataset


def class_means(num_classes: int = 10, radius: float = 10.0) -> torch.Tensor:
    """The (num_classes, 2) class centres ``mu_k``."""
    angles = 2.0 * math.pi * torch.arange(num_classes, dtype=torch.float64) / num_classes
    return (radius * torch.stack([torch.cos(angles), torch.sin(angles)], dim=1)).float()


def _sample(means: torch.Tensor, per_class: int, std: float, gen: torch.Generator) -> Split:
    k = means.shape[0]
    y = torch.arange(k, dtype=torch.int64).repeat_interleave(per_class)
    noise = torch.randn(k * per_class, 2, generator=gen)
    x = means[y] + std * noise
    perm = torch.randperm(y.shape[0], generator=gen)
    return Split(x=x[perm].contiguous(), y=y[perm].contiguous())


@register_dataset("toy_gaussian", normalize=False)
def load_toy_gaussian(
    *,
    root: str = "data",
    download: bool = False,
    seed: int = 0,
    samples_per_class: int = 30,
    test_samples_per_class: int = 100,
    radius: float = 10.0,
    std: float = 1.0,
    num_classes: int = 10,
) -> DatasetBundle:
    """Sample the toy data; train and test use independent streams of ``seed``."""
    del root, download
    require_positive_integers("toy_gaussian", samples_per_class=samples_per_class,
                              test_samples_per_class=test_samples_per_class, num_classes=num_classes)
    if float(std) < 0:
        raise DatasetError(f"toy_gaussian: std must be >= 0, got {std!r}")
    means = class_means(int(num_classes), float(radius))
    train = _sample(means, int(samples_per_class), float(std), make_generator(seed, 11, 0))
    test = _sample(means, int(test_samples_per_class), float(std), make_generator(seed, 11, 1))
    return DatasetBundle(
        name="toy_gaussian", train=train, test=test, num_classes=int(num_classes), is_image=False
    )
