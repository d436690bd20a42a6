"""Datasets as tensors: loaders, synthetic feature-shift domains, augmentation.

``load_dataset(name, ...)`` is the entry point:

1. the registered loader for ``name`` returns raw data (images float32 in
   [0, 1], shape (N, C, H, W); vectors (N, D));
2. if ``num_domains > 0`` (or ``domain_transforms`` is given) every train and
   test sample is assigned, stratified by label, to a synthetic domain whose
   fixed image transform is applied (see :mod:`fedbn_bench.data.domains`);
3. unless the dataset opts out (``toy_gaussian``) or ``normalize=False``, x is
   standardized per channel (per feature for vectors) with the mean and std
   of the *training split as returned by step 2*; the test split uses the same
   statistics.  No fixed per-dataset constants are used, so the train split
   always has mean 0 and std 1 per channel, also under feature shift.  The
   statistics are kept in ``bundle.norm_mean`` / ``bundle.norm_std``, and the black pixel
   ``Split.pad_value`` that random crops pad with is mapped the same way.

Everything is returned as CPU tensors; callers move splits with ``.to(device)``.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from .augment import random_crop_flip
from .base import DatasetBundle, DatasetError, Split
from .domains import DOMAIN_TRANSFORMS, apply_feature_shift, assign_domains, resolve_domain_names
from .lazy import LazyImages, is_lazy
from .registry import DATASETS, has_natural_domains, loader_options, normalize_by_default, register_dataset

# Importing the loader modules registers them.
from . import sklearn_digits as _sklearn_digits  # noqa: F401,E402
from . import toy_gaussian as _toy_gaussian  # noqa: F401,E402
from . import mnist as _mnist  # noqa: F401,E402
from . import cifar as _cifar  # noqa: F401,E402
from . import svhn as _svhn  # noqa: F401,E402
from . import usps as _usps  # noqa: F401,E402
from . import tinyimagenet as _tinyimagenet  # noqa: F401,E402
from . import digits5 as _digits5  # noqa: F401,E402
from . import digits5_standin as _digits5_standin  # noqa: F401,E402
from . import office_caltech10 as _office_caltech10  # noqa: F401,E402
from . import domainnet as _domainnet  # noqa: F401,E402
from . import abide as _abide  # noqa: F401,E402
from . import fedbn_gaussians as _fedbn_gaussians  # noqa: F401,E402
from . import imagenet as _imagenet  # noqa: F401,E402

__all__ = [
    "DATASETS",
    "DOMAIN_TRANSFORMS",
    "DatasetBundle",
    "DatasetError",
    "LazyImages",
    "Split",
    "apply_feature_shift",
    "assign_domains",
    "channel_stats",
    "dataset_has_natural_domains",
    "load_dataset",
    "normalize_bundle",
    "random_crop_flip",
    "register_dataset",
]

#: options handled by load_dataset itself (valid for every dataset)
COMMON_OPTIONS = ("normalize", "domain_transforms", "crop_padding")


def channel_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel (dim 1) mean and population std of ``x``, computed in float64."""
    if x.ndim < 2:
        raise ValueError(f"expected (N, C, ...) data, got shape {tuple(x.shape)}")
    dims = [0, *range(2, x.ndim)]
    xd = x.to(torch.float64)
    mean = xd.mean(dim=dims)
    std = xd.std(dim=dims, unbiased=False)
    std = torch.where(std > 1e-12, std, torch.ones_like(std))  # constant channel: only centre
    return mean.to(torch.float32), std.to(torch.float32)


def _standardize(x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return ((x - mean.view(shape)) / std.view(shape)).to(torch.float32)


def _standardized_black(split: Split, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``split``'s black pixel (``pad_value``, 0 if unset) after standardizing with ``mean``/``std``."""
    black = torch.zeros_like(mean) if split.pad_value is None else split.pad_value
    return ((black - mean) / std).to(torch.float32)


def normalize_bundle(bundle: DatasetBundle) -> DatasetBundle:
    """Standardize both splits with the train split's per-channel mean/std (and their black pixel).

    Lazy (memory-mapped) splits take their statistics from the cache's stored pixel sums and
    fold the standardization into their per-channel affine map.
    """
    if is_lazy(bundle.train.x):
        mean, std = bundle.train.x.channel_stats()
        bundle.train = Split(bundle.train.x.standardized(mean, std), bundle.train.y, bundle.train.domain,
                             _standardized_black(bundle.train, mean, std))
        bundle.test = Split(bundle.test.x.standardized(mean, std), bundle.test.y, bundle.test.domain,
                            _standardized_black(bundle.test, mean, std))
        bundle.norm_mean, bundle.norm_std = mean, std
        return bundle
    mean, std = channel_stats(bundle.train.x)
    bundle.train = Split(_standardize(bundle.train.x, mean, std), bundle.train.y, bundle.train.domain,
                         _standardized_black(bundle.train, mean, std))
    bundle.test = Split(_standardize(bundle.test.x, mean, std), bundle.test.y, bundle.test.domain,
                        _standardized_black(bundle.test, mean, std))
    bundle.norm_mean, bundle.norm_std = mean, std
    return bundle


def _canonical_name(name: str) -> str:
    key = str(name).strip().lower().replace("-", "_")
    DATASETS.get(key)  # raises DatasetError listing the allowed names
    return key


def dataset_has_natural_domains(name: str) -> bool:
    """Whether dataset ``name`` brings its own domains (sites); those take no synthetic shift."""
    return has_natural_domains(_canonical_name(name))


def load_dataset(
    name: str,
    *,
    root: str = "data",
    download: bool = False,
    seed: int = 0,
    num_domains: int = 0,
    **options: Any,
) -> DatasetBundle:
    """Load dataset ``name`` as CPU float32 tensors.

    Args:
        name: a name registered in :data:`DATASETS` (case-insensitive, ``-`` == ``_``).
        root: data directory in torchvision's standard layout.
        download: let torchvision fetch missing files (needs internet).
        seed: controls every random choice (splits, domains, toy samples).
        num_domains: number of synthetic feature-shift domains (0 = none);
            at most ``len(DOMAIN_TRANSFORMS)``.
        **options: dataset-specific options (e.g. ``test_fraction`` for
            ``sklearn_digits``, ``samples_per_class`` for ``toy_gaussian``)
            plus the common ``normalize`` (bool; default per dataset) and
            ``domain_transforms`` (list of transform names, overriding the
            default order) and ``crop_padding`` (int >= 0, default 4: pixels
            per side of the random crop, ``Split.crop_padding`` of the train
            split).  An option set to ``None`` means "use the default".

    Raises:
        DatasetError: unknown name or option, bad value, missing files, failed download.
    """
    key = _canonical_name(name)
    try:
        num_domains = int(num_domains or 0)
    except (TypeError, ValueError):
        raise DatasetError(f"num_domains must be an integer >= 0, got {num_domains!r}") from None
    if num_domains < 0:
        raise DatasetError(f"num_domains must be >= 0, got {num_domains}")

    options = {k: v for k, v in options.items() if v is not None}
    normalize = options.pop("normalize", None)
    crop_padding = options.pop("crop_padding", 4)
    if isinstance(crop_padding, bool) or not isinstance(crop_padding, int) or crop_padding < 0:
        raise DatasetError(f"crop_padding must be an integer >= 0 (dataset.options.crop_padding), got {crop_padding!r}")
    domain_transforms: Sequence[str] | None = options.pop("domain_transforms", None)
    if isinstance(domain_transforms, str):
        domain_transforms = [domain_transforms]
    allowed = loader_options(key)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        valid = sorted(allowed) + list(COMMON_OPTIONS)
        raise DatasetError(
            f"unknown option(s) {', '.join(unknown)} for dataset {key!r}; valid options: {', '.join(valid)}"
        )

    bundle = DATASETS.get(key)(root=root, download=bool(download), seed=int(seed), **options)

    if num_domains > 0 or domain_transforms is not None:
        if bundle.domain_names:
            raise DatasetError(
                f"dataset {key!r} has natural domains ({', '.join(bundle.domain_names)}); "
                "synthetic domains cannot be added: set dataset.num_domains=0"
            )
        if is_lazy(bundle.train.x):
            raise DatasetError(f"dataset {key!r} is read lazily; synthetic domains need it in memory (set num_domains=0)")
        names = resolve_domain_names(num_domains, domain_transforms)
        if not bundle.is_image:
            raise DatasetError(
                f"dataset {key!r} is not image data; synthetic domains need images (set num_domains=0)"
            )
        x_tr, d_tr = apply_feature_shift(bundle.train.x, bundle.train.y, names, int(seed), 0)
        x_te, d_te = apply_feature_shift(bundle.test.x, bundle.test.y, names, int(seed), 1)
        bundle.train = Split(x_tr, bundle.train.y, d_tr, bundle.train.pad_value)
        bundle.test = Split(x_te, bundle.test.y, d_te, bundle.test.pad_value)
        bundle.domain_names = list(names)

    if normalize is None:
        normalize = normalize_by_default(key)
    if normalize:
        bundle = normalize_bundle(bundle)

    for split in (bundle.train, bundle.test):
        split.x = split.x.to(device="cpu", dtype=torch.float32).contiguous()
        split.y = split.y.to(device="cpu", dtype=torch.int64).contiguous()
        if split.domain is not None:
            split.domain = split.domain.to(device="cpu", dtype=torch.int64).contiguous()
    bundle.train.crop_padding = crop_padding
    return bundle
