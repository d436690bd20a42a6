"""Dataset registry: one module per loader, each registered with a decorator.

A loader is a function with keyword-only arguments ``root``, ``download`` and
``seed`` plus its own keyword options (with defaults).  It returns a
:class:`~fedbn_bench.data.base.DatasetBundle` whose ``x`` are raw values
(images as float32 in [0, 1]); :func:`fedbn_bench.data.load_dataset` applies
the optional feature shift and the normalization afterwards.
"""

from __future__ import annotations

import inspect
from typing import Callable

import numpy as np
import torch

from fedbn_bench.registry import Registry

from .base import DatasetBundle, DatasetError

__all__ = [
    "DATASETS", "register_dataset", "loader_options", "normalize_by_default", "has_natural_domains", "make_generator",
]

Loader = Callable[..., DatasetBundle]

_COMMON_ARGS = ("root", "download", "seed")


def _check_loader(name: str, fn: Loader) -> Loader:
    """Registry check: a loader accepts the common keyword arguments."""
    params = inspect.signature(fn).parameters
    missing = [a for a in _COMMON_ARGS if a not in params]
    if missing:
        raise TypeError(f"loader for {name!r} must accept keyword arguments {missing}")
    return fn


#: name -> loader function
DATASETS: Registry[Loader] = Registry("dataset", error=DatasetError, check=_check_loader)
# name -> whether load_dataset normalizes this dataset unless told otherwise
_NORMALIZE_DEFAULT: dict[str, bool] = {}
# names of datasets whose loader sets Split.domain itself (sites, source datasets)
_NATURAL_DOMAINS: set[str] = set()


def register_dataset(
    name: str, *, normalize: bool = True, natural_domains: bool = False
) -> Callable[[Loader], Loader]:
    """Register a loader under ``name`` in :data:`DATASETS`.

    ``normalize`` is the default of the ``normalize`` option of
    :func:`load_dataset` for this dataset (False for data whose raw values are
    the object of study, such as the toy Gaussian example).
    ``natural_domains`` marks loaders that return ``Split.domain`` and
    ``domain_names`` themselves (FedBN's Digits-5, Office-Caltech10, DomainNet,
    ABIDE); synthetic feature shifts are refused for them.
    """

    def decorator(fn: Loader) -> Loader:
        fn = DATASETS.register(name)(fn)
        _NORMALIZE_DEFAULT[name] = normalize
        if natural_domains:
            _NATURAL_DOMAINS.add(name)
        return fn

    return decorator


def loader_options(name: str) -> dict[str, object]:
    """The dataset-specific options of a registered loader and their defaults."""
    params = inspect.signature(DATASETS.get(name)).parameters
    return {
        k: p.default
        for k, p in params.items()
        if k not in _COMMON_ARGS and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    }


def normalize_by_default(name: str) -> bool:
    """Whether :func:`load_dataset` normalizes dataset ``name`` unless told otherwise."""
    return _NORMALIZE_DEFAULT.get(name, True)


def has_natural_domains(name: str) -> bool:
    """Whether the registered dataset ``name`` comes with its own domains (see ``register_dataset``)."""
    return name in _NATURAL_DOMAINS


def make_generator(seed: int, *stream: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A torch generator seeded from ``(seed, *stream)``.

    Different ``stream`` tuples give statistically independent generators for
    the same user seed (train vs. test sampling, domain parameters, ...).
    """
    state = np.random.SeedSequence([int(seed) % 2**64, *[int(s) % 2**64 for s in stream]])
    g = torch.Generator(device=device)
    g.manual_seed(int(state.generate_state(1, dtype=np.uint64)[0] & 0x7FFFFFFFFFFFFFFF))
    return g
